"""The libraries a host ELF image may open at run time by name: ``dlopen(3)`` with a soname.

A library that opens another with ``dlopen("libcublas.so.12", ...)`` keeps that name as a
NUL-terminated string in its read-only data and imports ``dlopen`` from libc (an undefined
symbol of its dynamic symbol table); neither says more on its own (a string may be a message, a
library may dlopen only plugins). This module reports the facts, the analysis decides which
names matter (the CUDA libraries of kb/load.json): the ``lib*.so*`` names in the read-only data
sections of an image that imports ``dlopen``; () for an image that does not import it. A name
that follows a ``/`` is part of a path (dlopen of a path searches nothing) and is not reported.

Each soname's end starts with ``.so``: the data is searched for that mark with ``memmem``, in the
one pass over it that run-time compilers and the banner share (rodata.search_all), and
``SONAME_END`` is matched at each place (torch 2.14.1+cu130's site-packages: 787 places in 454 MB
of read-only data; a regular expression over every byte cost ~0.2 s of CPU there).
"""

from __future__ import annotations

import re
import struct
from typing import Any, List, Optional, Set, Tuple, Union

from .binreader import NotRecorded, Reader
from .dynsym import dynstr, undefined_at
from .elf import Sections
from .rodata import UNREAD, Search, read_only_regions, search_one

MAX_NAMES = 256  # names reported at most per image
MAX_NAME = 200  # bytes of one name at most
SO_MARK = b".so"  # where every soname's end starts (SONAME_END)
MAX_PLACES = 1 << 16  # places of the mark looked at per image at most
# the end of a soname: ".so", a version of up to four numbers, the string's NUL
SONAME_END = re.compile(rb"\.so(?:\.[0-9]{1,6}){0,4}\x00")
NAME_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+-.")


def dlopened_names(reader: Reader, sections: Sections) -> Optional[Tuple[str, ...]]:
    """The ``lib*.so*`` names in the read-only data of the image at the start of ``reader`` if
    its dynamic symbol table imports ``dlopen``, in the order found; () when it does not import
    it; None when the tables or data could not be read (a streamed member keeps headers only)."""
    search = names_search(reader, sections)
    if not isinstance(search, Search):
        return search
    return names_found(reader, search_one(reader, search))


def names_search(reader: Reader, sections: Sections) -> Union[Search, Tuple[()], None]:
    """What to search the image's data for (its ``.so`` places) if it imports ``dlopen``; ()
    when it does not; None when that could not be read, or the buffer does not hand out its
    bytes (a streamed member's: its names are read as it streams by, archives.streamnames)."""
    try:
        memoryview(reader.buf).release()
        if not imports_symbol(reader.buf, sections, b"dlopen"):
            return ()
    except (NotRecorded, TypeError, ValueError, struct.error):
        return None
    return Search(SO_MARK, read_only_regions(sections), MAX_PLACES)


def names_found(reader: Reader, search: Optional[Search]) -> Optional[Tuple[str, ...]]:
    """The names that end at ``search``'s places (``names_search``), each once, not part of a
    path, in the order found; None when the bytes could not be searched."""
    if search is None or search.failed:
        return None
    found: List[str] = []
    buf = reader.buf
    try:
        for at, first, last in search.hits:
            match = SONAME_END.match(buf, at, last)
            if match is None:
                continue
            name = name_before(buf, max(first, at - MAX_NAME), match.end() - 1)
            if name is not None and name not in found:
                found.append(name)
                if len(found) >= MAX_NAMES:
                    break
    except UNREAD:
        return None
    return tuple(found)


def imports_symbol(buf: Any, sections: Sections, symbol: bytes) -> bool:
    """Whether an undefined symbol of the dynamic symbol table is called ``symbol``: its name's
    offset in ``.dynstr`` is one where ``symbol`` and a NUL start (names may share a tail)."""
    table = dynstr(sections)
    if table is None:
        return False
    start, size = table
    wanted = symbol + b"\0"
    spots: Set[int] = set()
    at = buf.find(wanted, start, start + size)
    while at >= 0:
        spots.add(at - start)
        at = buf.find(wanted, at + 1, start + size)
    return bool(spots) and bool(undefined_at(buf, sections, spots))


def name_before(buf: Any, floor: int, end: int) -> Optional[str]:
    """The name that ends at ``end``: the bytes of soname characters before it, if they start
    with ``lib`` and not after a ``/``."""
    piece = bytes(buf[floor:end])
    at = len(piece)
    while at > 0 and piece[at - 1] in NAME_BYTES:
        at -= 1
    if at > 0 and piece[at - 1] == 0x2F:  # "/": a path
        return None
    name = piece[at:]
    return name.decode("ascii") if name.startswith(b"lib") and len(name) > 6 else None
