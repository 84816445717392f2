"""The CUDA functions through which a host ELF image may load device code itself.

The runtime registers a library's listed fatbin (``.nv_fatbin``) for it. Device code kept
anywhere else (cuFFT's ``.ldata``, cuBLASLt's ``.cask_resource``) runs only if the library hands
it to the driver itself: with ``cuModuleLoadData``/``cuModuleLoadDataEx``/
``cuModuleLoadFatBinary`` or ``cuLibraryLoadData`` (CUDA Driver API, "Module Management" and
"Library Management"), the runtime's ``cudaLibraryLoadData`` (CUDA Runtime API, "Library
Management", since 12.0), or a driver function pointer it asks for by name
(``cuGetProcAddress``, ``cudaGetDriverEntryPoint``). Linked against libcuda or libcudart, such a
library imports one of those symbols: an undefined symbol of its dynamic symbol table. (A
library that opens libcuda itself, as a statically linked CUDA runtime does, names it among the
sonames it dlopens instead: ``BinaryFacts.dlopens``.)

Read with the image's strings (hostelf.read_strings), from ``.dynstr`` and ``.dynsym`` only: the
string table is searched for each name's start, and the symbol table is read only when one is
there (most libraries name none of them).
"""

from __future__ import annotations

import struct
import sys
from typing import Any, Dict, List, Optional, Tuple

from .binreader import NotRecorded
from .elf import Sections

SHT_DYNSYM = 11
SHN_UNDEF = 0
ELF64_SYM = struct.Struct("<IBBHQQ")  # st_name, st_info, st_other, st_shndx, st_value, st_size
MAX_DYNSYM_BYTES = 64 << 20  # a symbol table read at most (libtorch_cuda.so: ~5 MiB)
MAX_SPOTS = 4096  # name starts looked at in .dynstr at most
MAX_NAME = 64  # bytes of one symbol's name at most
# The names' starts: a symbol whose name starts with one of them (cuModuleLoadDataEx,
# cuLibraryLoadData, cuGetProcAddress_v2, cudaGetDriverEntryPointByVersion) counts.
PREFIXES = (
    b"cuModuleLoad",
    b"cuLibraryLoad",
    b"cudaLibraryLoad",
    b"cuGetProcAddress",
    b"cudaGetDriverEntryPoint",
)


def loader_imports(buf: Any, sections: Sections) -> Optional[Tuple[str, ...]]:
    """The names starting with ``PREFIXES`` among the undefined symbols of the image's dynamic
    symbol table, sorted; () when there are none (or no table); None when the bytes could not
    be read (a streamed member keeps its headers only)."""
    try:
        return _imports(buf, sections)
    except (NotRecorded, TypeError, ValueError, IndexError, struct.error):
        return None


def _imports(buf: Any, sections: Sections) -> Tuple[str, ...]:
    tables = [i for i, kind in enumerate(sections.types) if kind == SHT_DYNSYM]
    strings = sections.named(b".dynstr")
    if not tables or not strings:
        return ()
    spots = _name_spots(buf, sections.offsets[strings[0]], sections.sizes[strings[0]])
    if not spots:
        return ()
    offset = sections.offsets[tables[0]]
    size = min(sections.sizes[tables[0]], MAX_DYNSYM_BYTES)
    raw = bytes(buf[offset : offset + size - size % ELF64_SYM.size])
    if sys.byteorder == "little":
        names: List[int] = memoryview(raw).cast("I")[0::6].tolist()
        shndx: List[int] = memoryview(raw).cast("H")[3::12].tolist()
    else:
        rows = list(ELF64_SYM.iter_unpack(raw))
        names, shndx = [r[0] for r in rows], [r[3] for r in rows]
    found = {spots[n] for n, s in zip(names, shndx) if s == SHN_UNDEF and n in spots}
    return tuple(sorted(found))


def _name_spots(buf: Any, start: int, size: int) -> Dict[int, str]:
    """Offsets in ``.dynstr`` (at ``start``, ``size`` bytes) where one of ``PREFIXES`` starts,
    and the name from there to its NUL: a symbol whose name starts there has that name (names
    may share a tail, so a start need not follow a NUL)."""
    spots: Dict[int, str] = {}
    end = start + size
    for prefix in PREFIXES:
        at = buf.find(prefix, start, end)
        while at >= 0 and len(spots) < MAX_SPOTS:
            stop = buf.find(b"\0", at, min(end, at + MAX_NAME))
            if stop > at:
                spots[at - start] = bytes(buf[at:stop]).decode("ascii", "replace")
            at = buf.find(prefix, at + 1, end)
    return spots


__all__ = ["PREFIXES", "loader_imports"]
