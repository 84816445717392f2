"""Where the string searches of a linked library look (probe.binary.rodata), on real libraries.

Expectations, from first principles:
- GCC and Clang put string literals in ``.rodata.str*`` / ``.rodata.*``, which the default linker
  scripts gather into ``.rodata``; under the x86-64 medium and large code models (``-mcmodel``)
  large data goes to ``.lrodata`` (flag ``l``, SHF_X86_64_LARGE). cuFFT 12.0
  (nvidia-cufft 12.0.0.61, pinned by torch 2.14.1+cu130): ``readelf -S`` shows ``.rodata``
  (0xa590 bytes) and ``.lrodata`` (0x10a0bc bytes, flags ``Al``); ``readelf -p .lrodata`` lists
  ``libcuda.so.1`` at 0xaf7, ``libnvJitLink.so.13`` at 0x1289 and ``libnvrtc.so.13`` at 0x1342;
  ``readelf -p .rodata`` holds no ``.so`` string; ``readelf --dyn-syms``: ``dlopen@GLIBC_2.2.5``
  is UND. So its dlopen names are the three, in that order, and only a search that reads
  ``.lrodata`` finds them (cuFFT opens NVRTC and nvJitLink for LTO callbacks).
"""

from __future__ import annotations

import contextlib
import mmap
import os

import pytest

from archgap.api import kernels
from archgap.probe.binary.banner import cuda_release
from archgap.probe.binary.binreader import Reader
from archgap.probe.binary.dlnames import dlopened_names
from archgap.probe.binary.elf import section_table
from archgap.probe.binary.fatbin import read_binary
from archgap.probe.binary.hostelf import device_code_only
from archgap.probe.binary.rtcompilers import runtime_compilers
from tests.helpers import DATA, need_data

CUFFT = DATA / "venv-nvidia-cufft-12.0.0.61"


def test_cuffts_dlopen_names_are_read_from_its_large_model_rodata() -> None:
    need_data(CUFFT.name)
    (library,) = CUFFT.glob("lib/python*/site-packages/nvidia/cu13/lib/libcufft.so.12")
    facts = read_binary(str(library))
    assert facts.dlopens == ("libcuda.so.1", "libnvJitLink.so.13", "libnvrtc.so.13")
    assert facts.compilers == ()  # no NVRTC or NVPTX backend of its own: it dlopens them


# -- one pass over the read-only data, and a read of device code only ---------------------------
# CUPTI 13.0.85's libcupti.so.13 (tests/.data/venv-nvidia-cuda-cupti-13.0.85): ``readelf -S`` shows
# one literals' section, ``.rodata`` at 0x2a3000, 0x6b068 bytes (less than one rodata.PIECE), and
# no ``.nv_fatbin``; ``readelf --dyn-syms``: ``dlopen@GLIBC_2.2.5`` UND; ``readelf -p .rodata``:
# ``libcuda.so.1`` at 0x481 (its first soname) and 35 "Cuda compilation tools" banners, the newest
# ``release 13.1`` (test_cuda13_banner); ``strings`` finds no ``nvptx64-nvidia-cuda``. So all three
# readers have something to look for there: names (it imports dlopen), the banner (no cubin of
# its is walked, so no note names a release) and a compiler's triple (none).
CUPTI = DATA / "venv-nvidia-cuda-cupti-13.0.85"
RODATA = (0x2A3000, 0x2A3000 + 0x6B068)


def cupti() -> str:
    need_data(CUPTI.name)
    (library,) = CUPTI.glob("lib/python*/site-packages/nvidia/cu13/lib/libcupti.so.13")
    return str(library)


def test_the_read_only_data_is_searched_in_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """The three readers share one pass: the piece of .rodata is mapped and handed back once
    (three passes handed it back three times, one per reader)."""
    handed_back: list[tuple[int, int]] = []
    release = Reader.release

    def counted(self: Reader, start: int, stop: int) -> int:
        if RODATA[0] <= start < RODATA[1]:
            handed_back.append((start, stop))
        return release(self, start, stop)

    monkeypatch.setattr(Reader, "release", counted)
    facts = read_binary(cupti())
    assert handed_back == [(RODATA[0], RODATA[1])]
    assert facts.dlopens is not None and facts.dlopens[0] == "libcuda.so.1"
    assert facts.compilers == ()
    assert facts.cuda_release == "13.1"


def test_one_pass_finds_what_each_reader_finds_alone() -> None:
    """What the shared pass finds is what each reader finds searching on its own."""
    path = cupti()
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        with contextlib.closing(mmap.mmap(fd, size, access=mmap.ACCESS_READ)) as buf:
            reader = Reader(buf, size, False, fd)
            _, sections = section_table(reader, 0, size, "", only_fatbin=False)
            assert sections is not None
            alone = (
                dlopened_names(reader, sections),
                runtime_compilers(reader, sections),
                cuda_release(reader, sections),
            )
    finally:
        os.close(fd)
    facts = read_binary(path)
    assert (facts.dlopens, facts.compilers, facts.cuda_release) == alone
    assert alone[0] is not None and "libcupti.so" in alone[0]


def test_device_code_only_leaves_the_strings_unread() -> None:
    """Where the output shows device code only (kernels' table), the strings are not read (None:
    not read) and the device code found is the same; cuFFT 12.0 (above) keeps three dlopen names
    and one listed fatbin."""
    need_data(CUFFT.name)
    (library,) = CUFFT.glob("lib/python*/site-packages/nvidia/cu13/lib/libcufft.so.12")
    full = read_binary(str(library))
    with device_code_only():
        bare = read_binary(str(library))
    assert (bare.dlopens, bare.compilers, bare.cuda_release) == (None, None, None)
    assert full.dlopens == ("libcuda.so.1", "libnvJitLink.so.13", "libnvrtc.so.13")
    assert bare.entries == full.entries and full.entries
    assert (bare.needed, bare.toolkits) == (full.needed, full.toolkits)
    # what the API returns for kernels' table (strings=False) and for its document (the default)
    table = kernels([str(library)], strings=False).files[0]
    document = kernels([str(library)]).files[0]
    assert table.dlopens is None and document.dlopens == full.dlopens
