"""A wheel member too large to read in memory is read as it streams by (archives/streamread.py);
what its library may dlopen is kept too, so the wheel is judged as the installed package is.

The real ctranslate2 4.8.5 wheel for CPython 3.11 (scripts/testdata: tests/.data/wheels-dlopen)
and the same release installed (venv-ctranslate2-4.8.5). From the files, without archgap
(binutils 2.40):

- `unzip -l`: ctranslate2.libs/libctranslate2-a7a60d30.so.4.8.5 is 80,773,681 bytes and
  ctranslate2/_ext.cpython-311-x86_64-linux-gnu.so 68,018,745: both over the 64 MiB a member is
  read in memory, so both are streamed.
- `readelf --dyn-syms` of libctranslate2: ``dlopen@GLIBC_2.2.5`` is UND (imported); of _ext: no
  dlopen at all (so it opens nothing by name: ``()``).
- `readelf -p .rodata` of libctranslate2: its lib*.so* strings, in this order, are
  ``READELF_RODATA`` below (CTranslate2's src/cuda/cublas_stub.cc dlopens libcublas.so.<major>).
- `readelf -d`: libctranslate2 NEEDS ``READELF_NEEDED`` with RPATH $ORIGIN; `readelf -SW`: its
  .dynstr (0x4c8a840) lies after its section table (0x4c8a000, patchelf moved it when auditwheel
  renamed libgomp), and its .dynsym at 0xda18, 80 MB before the section table.

Before: the streamed library's needed names and dlopen names were both "not read" (None), and
`scan WHEEL` named no library it dlopens.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from archgap.archives.wheel import IN_MEMORY_MAX, read_wheel
from archgap.probe.binary.fatbin import read_binary
from tests.helpers import json_output, need_data, run_cli

WHEEL_NAME = "ctranslate2-4.8.5-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
LIBRARY = "ctranslate2.libs/libctranslate2-a7a60d30.so.4.8.5"
EXTENSION = "ctranslate2/_ext.cpython-311-x86_64-linux-gnu.so"
READELF_RODATA = (
    "libmpi.so.40",
    "libnccl.so.2",
    "libcublas.so.12",
    "libcuda.so.1",
    "libmkl_def.so.2",
    "libmkl_vml_def.so.2",
    "libmkl_vml_cmpt.so.2",
    "libmkl_mc3.so.2",
    "libmkl_vml_mc3.so.2",
    "libmkl_avx2.so.2",
    "libmkl_vml_avx2.so.2",
    "libmkl_avx512.so.2",
    "libmkl_vml_avx512.so.2",
    "libmemkind.so",
    "libittnotify.so",
)
READELF_NEEDED = ("libdl.so.2", "librt.so.1", "libpthread.so.0", "libgomp-e985bcbb.so.1.0.0",
                  "libstdc++.so.6", "libm.so.6", "libgcc_s.so.1", "libc.so.6",
                  "ld-linux-x86-64.so.2")  # fmt: skip


def wheel_and_site() -> tuple[Path, Path]:
    wheels, venv = need_data("wheels-dlopen", "venv-ctranslate2-4.8.5")
    return wheels / WHEEL_NAME, next(venv.glob("lib/python*/site-packages"))


def test_streamed_members_keep_what_they_dlopen() -> None:
    wheel, site = wheel_and_site()
    with zipfile.ZipFile(wheel) as zf:
        sizes = {m: zf.getinfo(m).file_size for m in (LIBRARY, EXTENSION)}
    assert min(sizes.values()) > IN_MEMORY_MAX  # both are read as they stream by
    for deep in (False, True):
        members = {
            b.path.split(".whl/", 1)[1]: b for b in read_wheel(str(wheel), deep=deep).binaries
        }
        library, extension = members[LIBRARY], members[EXTENSION]
        assert (library.format, library.error) == ("elf", None)
        assert library.dlopens == READELF_RODATA
        assert (library.needed, library.runpath) == (READELF_NEEDED, ("$ORIGIN",))
        assert extension.dlopens == ()  # it imports no dlopen
        assert extension.runpath == ("$ORIGIN/../ctranslate2.libs",)
        # the file reader over the installed files (every byte at hand) finds the same
        for member, streamed in members.items():
            installed = read_binary(str(site / member), deep)
            assert (streamed.needed, streamed.runpath, streamed.dlopens) == (
                installed.needed, installed.runpath, installed.dlopens
            ), member  # fmt: skip


def test_scanning_the_wheel_names_the_cuda_libraries_it_dlopens() -> None:
    """kb/load.json: libcublas.so.12 and libnccl.so.2 are CUDA libraries (of nvidia-cublas-cu12
    and nvidia-nccl-cu12), libcuda.so.1 is the driver's, the MKL names are none: the wheel's
    scan has a dlopen finding for each of the first two, as the installed package's has
    (tests/integration/test_load_dlopen.py), and none for the others."""
    wheel, _ = wheel_and_site()
    result = run_cli("scan", str(wheel), "--gpu", "H100", "--driver", "580.95.05", "--json")
    doc = json_output(result, "scan")
    opened = {
        name
        for finding in doc["load"]
        if finding["check"] == "dlopen-library" and finding["package"] == "ctranslate2"
        for name in ("libcublas.so.12", "libnccl.so.2", "libcuda.so.1", "libmkl_def.so.2")
        if f"opens {name} " in finding["cause"]
    }
    assert opened == {"libcublas.so.12", "libnccl.so.2"}
    (library,) = {p for f in doc["load"] for p in f["libraries"]}
    assert library.endswith(f"{WHEEL_NAME}/{LIBRARY}")
