"""A CUDA 13 wheel whose library is too large to read in memory: cuFFT 12.0 (nvidia-cufft
12.0.0.61, as torch 2.14.1+cu130 pins it).

Its ``nvidia/cu13/lib/libcufft.so.12`` is 286,542,352 bytes (the installed RECORD), over the
64 MiB a wheel member is read in memory, so it is read as it streams out of the zip
(archives/streamread.py). Its kernels are ~24,000 fatbin containers in ``.ldata``
(tests/integration/test_cufft_ldata.py), thousands of them small LZ4 PTX and cubins whose content
the reader looks at for a kernel; keeping those payloads for the reader filled the stream's
bound (57 MB packed) before the section table at the end of the file went by, so the member was
"unknown": no kernels, no DT_NEEDED, and `scan WHEEL` could not say that it needs the libraries
below or that it is CUDA 13.

What the file holds, without archgap: `readelf -d` (binutils 2.40) of the installed file::

    (NEEDED)   Shared library: [libdl.so.2]
    (NEEDED)   Shared library: [libm.so.6]
    (NEEDED)   Shared library: [libpthread.so.0]
    (NEEDED)   Shared library: [librt.so.1]
    (NEEDED)   Shared library: [libgcc_s.so.1]
    (NEEDED)   Shared library: [libc.so.6]
    (NEEDED)   Shared library: [ld-linux-x86-64.so.2]
    (SONAME)   Library soname: [libcufft.so.12]
    (RUNPATH)  Library runpath: [$ORIGIN]

The wheel read here is made in a temporary directory from the installed package's own bytes (its
RECORD's files, deflated as pip's wheels are), so the streamed member and the installed file are
the same bytes, and the file reader over the installed file (mmap, random access) is the other
reading the stream must equal. NVIDIA's rules applied: a CUDA 13 library needs an R580 driver
(CUDA 13.0 release notes, Table 2: minor version compatibility needs >= 580); SASS sm_80 runs on
compute capability 8.0 (CUDA C++ Programming Guide, binary compatibility), and cuFFT's ``.ldata``
cubins include sm_80 (test_cufft_ldata.py walks them with cuobjdump).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from archgap.archives.wheel import IN_MEMORY_MAX, read_wheel
from archgap.probe.binary.fatbin import read_binary
from tests.helpers import json_output, need_data, run_cli

MEMBER = "nvidia/cu13/lib/libcufft.so.12"
SIZE = 286_542_352  # its RECORD line
READELF_NEEDED = (
    "libdl.so.2",
    "libm.so.6",
    "libpthread.so.0",
    "librt.so.1",
    "libgcc_s.so.1",
    "libc.so.6",
    "ld-linux-x86-64.so.2",
)


@pytest.fixture(scope="module")
def installed() -> Path:
    (venv,) = need_data("venv-nvidia-cufft-12.0.0.61")
    return next(venv.glob("lib/python*/site-packages"))


@pytest.fixture(scope="module")
def wheel(installed: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package's files as its wheel holds them (the RECORD's files, deflated)."""
    info = installed / "nvidia_cufft-12.0.0.61.dist-info"
    path = tmp_path_factory.mktemp("cufft") / (
        "nvidia_cufft-12.0.0.61-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
    )
    names = [line.split(",")[0] for line in (info / "RECORD").read_text().splitlines() if line]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for name in names:
            if name.split("/")[-1] not in ("INSTALLER", "REQUESTED"):  # pip's, not the wheel's
                zf.write(installed / name, name)
    return path


def test_the_streamed_member_is_read_like_the_installed_file(installed: Path, wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo(MEMBER)
    assert info.file_size == SIZE > IN_MEMORY_MAX  # read as it streams, not in memory
    for deep in (False, True):
        (lib,) = [b for b in read_wheel(str(wheel), deep=deep).binaries if b.path.endswith(MEMBER)]
        assert (lib.format, lib.error) == ("elf", None)
        assert lib.needed == READELF_NEEDED
        assert lib.runpath == ("$ORIGIN",)
        file = read_binary(str(installed / MEMBER), deep)
        assert (lib.size, lib.machine, lib.entries, lib.toolkits) == (
            file.size, file.machine, file.entries, file.toolkits
        ), deep  # fmt: skip
        if deep:  # the kernels cuFFT loads itself: sm_80 SASS in .ldata
            assert any(e.section == ".ldata" and e.arch == 80 for e in lib.entries)


def test_scan_of_the_wheel_applies_the_driver(wheel: Path) -> None:
    """On driver 570 the CUDA 13 library cannot load on an A100; on 580 it runs there (its
    .ldata SASS sm_80). Before, it was "unknown" at every driver: no entries were read."""
    old = json_output(
        run_cli("scan", str(wheel), "--gpu", "A100", "--driver", "570", "--json"), "scan"
    )
    new = json_output(
        run_cli("scan", str(wheel), "--gpu", "A100", "--driver", "580", "--json"), "scan"
    )
    (on_570,) = [p for p in old["packages"] if p["package"] == "nvidia-cufft"]
    (on_580,) = [p for p in new["packages"] if p["package"] == "nvidia-cufft"]
    assert on_580["verdict"] == "native"
    assert on_570["verdict"] not in ("native", "partial", "jit", "unknown")
    assert "580" in on_570["reason"] and "CUDA 13" in on_570["reason"]
