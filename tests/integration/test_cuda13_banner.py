"""A library's CUDA major from the toolkit banner in its data, and the driver it then needs.

Expectations from the files themselves (``strings -n8 FILE | grep 'Cuda compilation tools'``)
and NVIDIA's rule (CUDA release notes, Table 2, minor-version compatibility: CUDA 13.x needs a
driver >= 580, CUDA 12.x >= 525.60.13):

- CUPTI 13.0.85 (tests/.data/venv-nvidia-cuda-cupti-13.0.85): ``libcupti.so.13`` holds
  ``Cuda compilation tools, release 13.0, V13.0.21`` (33 times) and ``release 13.1, V13.1.0``
  (39, some in writable ``.data``); ``libcheckpoint.so`` holds ``release 13.0, V13.0.21``.
  A plain read (no deep search) walks no device code in them: only the banner says CUDA 13.
- warp-lang 1.19.0's ``warp.so`` links NVRTC statically: ``Cuda compilation tools, release 13.4,
  V13.4.92, Build cuda_13.4.r13.4/compiler.38855100_0`` in ``.rodata``.
- NVRTC 12.6's ``libnvrtc.so.12`` (venv-cupy-cuda12x-nvrtc-12.6): ``release 12.6, V12.6.85``
  (and a format string ``release %d.%d,``, which names no release): CUDA 12, which 570 runs.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from dataclasses import replace

from archgap.analysis.verdicts.drivers import cuda_majors, driver_cuda
from archgap.probe.binary.banner import cuda_release
from archgap.probe.binary.binreader import Reader
from archgap.probe.binary.elf import section_table
from archgap.probe.binary.fatbin import read_binary
from tests.helpers import DATA, json_output, need_data, run_cli

SITE = "lib/python3.11/site-packages"
CUPTI = DATA / "venv-nvidia-cuda-cupti-13.0.85"
CUPTI_LIB = CUPTI / SITE / "nvidia/cu13/lib"
WARP = DATA / "venv-warp-lang-1.19.0" / SITE / "warp/bin/warp.so"
NVRTC12 = DATA / "venv-cupy-cuda12x-nvrtc-12.6" / SITE / "nvidia/cuda_nvrtc/lib/libnvrtc.so.12"


def banner_of(path: str) -> str | None:
    """The banner module on its own, over the whole image's section table."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        with contextlib.closing(mmap.mmap(fd, size, access=mmap.ACCESS_READ)) as buf:
            reader = Reader(buf, size, False, fd)
            _, sections = section_table(reader, 0, size, "", only_fatbin=False)
            return cuda_release(reader, sections)
    finally:
        os.close(fd)


def test_cupti_without_walked_device_code_is_cuda_13_by_its_banner() -> None:
    need_data(CUPTI.name)
    cupti = read_binary(str(CUPTI_LIB / "libcupti.so.13"))  # plain: no deep search
    assert cupti.entries == () and cupti.toolkits == ()  # nothing else says its CUDA
    assert cupti.cuda_release == "13.1"
    assert read_binary(str(CUPTI_LIB / "libcheckpoint.so")).cuda_release == "13.0"
    # the content decides, not the nvidia/cu13/ path: the same facts anywhere else
    moved = replace(cupti, path="/opt/profiler/libcupti.so.13")
    assert list(cuda_majors(moved, "")) == [13]
    assert "release 13.1" in cuda_majors(moved, "")[13][0]


def test_the_driver_check_blocks_cupti_on_570_and_not_on_580() -> None:
    need_data(CUPTI.name)
    cupti = replace(read_binary(str(CUPTI_LIB / "libcupti.so.13")), path="/opt/libcupti.so.13")
    blocked: dict[tuple[str, str], str] = {}
    (finding,) = driver_cuda([cupti], {}, "570.86.15", "--driver", blocked, True)
    assert "needs driver >= 580" in finding.cause and "release 13.1" in finding.cause
    assert ("/opt/libcupti.so.13", "") in blocked
    assert driver_cuda([cupti], {}, "580.65.06", "--driver", {}, True) == []


def test_warp_static_nvrtc_banner_and_a_cuda_12_nvrtc() -> None:
    need_data("venv-warp-lang-1.19.0", "venv-cupy-cuda12x-nvrtc-12.6")
    assert banner_of(str(WARP)) == "13.4"
    nvrtc = read_binary(str(NVRTC12))
    assert nvrtc.cuda_release == "12.6"
    assert list(cuda_majors(replace(nvrtc, path="/x/libnvrtc.so.12"), "")) == [12]
    assert driver_cuda([nvrtc], {}, "570.86.15", "--driver", {}, True) == []  # 570 runs 12.x


def test_a_library_with_no_banner_says_none() -> None:
    need_data("venv-jax-cuda12-mismatch")
    lib = DATA / "venv-jax-cuda12-mismatch" / SITE / "jax_cuda12_plugin/_prng.so"
    assert read_binary(str(lib)).cuda_release == ""


def test_scan_shows_cupti_blocked_below_580_and_native_from_580() -> None:
    """A profiler library is loaded by the profilers (torch.profiler, Nsight): on a driver that
    does not run its CUDA it cannot load, and its row says so (it still does not count toward
    the package's verdict)."""
    need_data(CUPTI.name)
    python = str(CUPTI / "bin" / "python")
    for driver, want in (("570.86.15", "blocked"), ("580.65.06", "native")):
        result = run_cli(
            "scan", "--python", python, "--gpu", "H100", "--libs", "--driver", driver, "--json"
        )
        doc = json_output(result, "scan")
        (package,) = [p for p in doc["packages"] if p["package"] == "nvidia-cuda-cupti"]
        rows = {lib["path"].rsplit("/", 1)[1]: lib for lib in package["libraries"]}
        for name in ("libcupti.so.13", "libcheckpoint.so"):
            assert rows[name]["verdict"] == want, (driver, rows[name])
            if want == "blocked":
                assert "needs driver >= 580" in rows[name]["load"]
        assert package["verdict"] == "no-kernels"  # profilers are not counted
