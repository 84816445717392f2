"""The CUDA functions through which a host ELF image may load device code itself.

The runtime registers a library's listed fatbin (``.nv_fatbin``) for it. Device code kept
anywhere else (cuFFT's ``.ldata``, cuBLASLt's ``.cask_resource``) runs only if the library hands
it to the driver itself: with ``cuModuleLoadData``/``cuModuleLoadDataEx``/
``cuModuleLoadFatBinary`` or ``cuLibraryLoadData`` (CUDA Driver API, "Module Management" and
"Library Management"), the runtime's ``cudaLibraryLoadData`` (CUDA Runtime API, "Library
Management", since 12.0), or a driver function pointer it asks for by name
(``cuGetProcAddress``, ``cudaGetDriverEntryPoint``). Linked against libcuda or libcudart, such a
library imports one of those symbols: an undefined symbol of its dynamic symbol table
(``loader_imports``). A library that opens libcuda itself, as a statically linked CUDA runtime
does, names it among the sonames it dlopens (``BinaryFacts.dlopens``); one that resolves the
loader by name keeps the name in its read-only data (``names_found``: a dlopen stub, as
jax-cuda12-plugin 0.6's ``_triton.so``, which builds libcuda's name at run time and keeps
``cuModuleLoadData`` and ``cuLibraryLoadData`` in ``.rodata``; a static runtime's table of
driver entry points).

The imports are read with the image's strings (hostelf.read_strings), from ``.dynstr`` and
``.dynsym`` only: the string table is searched for each name's start, and the symbol table is
read only when one is there (most libraries name none of them). The names are searched in the
one pass over the read-only data that the dlopen names, run-time compilers and banner share
(rodata.search_all): ~0.05 s of CPU over the plain read of torch 2.14.1+cu130's site-packages
(0.77 s; 3 runs each, /tmp script timing ``read_binary`` of every ELF file).
"""

from __future__ import annotations

import struct
from typing import Any, Dict, Optional, Tuple

from .binreader import NotRecorded, Reader
from .dynsym import dynstr, undefined_at
from .elf import Sections
from .rodata import UNREAD, Search, read_only_regions

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


# What a library that resolves a loader by name keeps in its read-only data: the function's
# name, for dlsym or cuGetProcAddress (a dlopen stub, as XLA's for libcuda; a statically linked
# CUDA runtime's table of driver entry points). Each such name ends in ``LoadData``.
NAME_MARK = b"LoadData"
NAME_STARTS = (b"cuModule", b"cuLibrary", b"cudaLibrary")
MAX_NAME_PLACES = 256  # places of the mark looked at per image at most


def names_search(sections: Sections) -> Search:
    """What to search the image's read-only data for: the loaders' names (``NAME_MARK``)."""
    return Search(NAME_MARK, read_only_regions(sections), MAX_NAME_PLACES)


def names_found(reader: Reader, search: Optional[Search]) -> Optional[Tuple[str, ...]]:
    """The loaders' names (``cuModuleLoadData``, ``cuLibraryLoadData``, ``cudaLibraryLoadData``)
    at ``search``'s places, sorted, each once; None when the bytes could not be searched."""
    if search is None or search.failed:
        return None
    found = set()
    try:
        for at, first, _ in search.hits:
            for start in NAME_STARTS:
                if at - len(start) >= first and reader.buf[at - len(start) : at] == start:
                    found.add((start + NAME_MARK).decode("ascii"))
    except UNREAD:
        return None
    return tuple(sorted(found))


def loader_imports(buf: Any, sections: Sections) -> Optional[Tuple[str, ...]]:
    """The names starting with ``PREFIXES`` among the undefined symbols of the image's dynamic
    symbol table, sorted; () when there are none (or no table); None when the bytes could not
    be read (a streamed member keeps its headers only)."""
    try:
        return _imports(buf, sections)
    except (NotRecorded, TypeError, ValueError, IndexError, struct.error):
        return None


def _imports(buf: Any, sections: Sections) -> Tuple[str, ...]:
    table = dynstr(sections)
    if table is None:
        return ()
    spots = _name_spots(buf, *table)
    if not spots:
        return ()
    return tuple(sorted({spots[n] for n in undefined_at(buf, sections, spots)}))


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


__all__ = ["NAME_MARK", "PREFIXES", "loader_imports", "names_found", "names_search"]
