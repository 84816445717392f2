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

from archgap.probe.binary.fatbin import read_binary
from tests.helpers import DATA, need_data

CUFFT = DATA / "venv-nvidia-cufft-12.0.0.61"


def test_cuffts_dlopen_names_are_read_from_its_large_model_rodata() -> None:
    need_data(CUFFT.name)
    (library,) = CUFFT.glob("lib/python*/site-packages/nvidia/cu13/lib/libcufft.so.12")
    facts = read_binary(str(library))
    assert facts.dlopens == ("libcuda.so.1", "libnvJitLink.so.13", "libnvrtc.so.13")
    assert facts.compilers == ()  # no NVRTC or NVPTX backend of its own: it dlopens them
