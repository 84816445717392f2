"""What a streamed library may ``dlopen`` by name (probe.binary.dlnames), read as it streams by.

An installed library's dlopen names are the ``lib*.so*`` strings of its read-only data sections
when its dynamic symbol table imports ``dlopen`` (probe.binary.dlnames, whose rules these are).
A streamed member (archives.streamread) learns where those sections are only from its section
table, at the end of the stream, after the data went by. So, as the bytes go by, each string
that can be such a name is noted where it lies (``SonameCandidates``: every ``.so`` that ends a
soname as ``dlnames.SONAME_END`` matches, with the bytes before it that the name can take); once
the section table is read, the names are those that lie in the read-only sections, found in the
order and with the rules of ``dlnames`` (``streamed_dlopens``). Whether the library imports
``dlopen`` is read from its ``.dynsym`` and ``.dynstr``, which the stream keeps
(``Collector``: the front of the image, where linkers put ``.dynsym``, and either table where it
lies after the section table, as patchelf moves ``.dynstr``).

Memory: ``MAX_CANDIDATES`` strings of at most ``MAX_NAME`` + ``MATCH_SPAN`` bytes; past that the
names are not known (None), never a partial list.
"""

from __future__ import annotations

import bisect
import dataclasses
import struct

from archgap.probe.binary.binreader import NotRecorded
from archgap.probe.binary.bytesearch import searcher
from archgap.probe.binary.dlnames import (
    MAX_NAME,
    MAX_NAMES,
    SONAME_END,
    imports_symbol,
    name_before,
)
from archgap.probe.binary.dynsym import SHT_DYNSYM
from archgap.probe.binary.elf import Sections, section_table
from archgap.probe.binary.rodata import read_only_regions
from archgap.probe.facts import BinaryFacts

from .kept import Kept, KeptReader

SO_MARK = b".so"  # where every soname's end starts (SONAME_END)
MATCH_SPAN = 40  # bytes from ".so" a soname's end can take: ".so", four ".NNNNNN", its NUL
MAX_CANDIDATES = 1 << 14  # soname strings noted per library at most (~4 MiB)
PF_W = 0x2  # a program header's flag: the segment is written


class SonameCandidates:
    """The strings of one library that may be names it dlopens: (where the ``.so`` starts,
    where the match ends, where ``raw`` starts, the bytes up to the match's end)."""

    def __init__(self) -> None:
        self.found: list[tuple[int, int, int, bytes]] = []
        self.complete = True  # False once MAX_CANDIDATES was passed
        # [start, end) of the segments loaded and not written (where read-only data is), from
        # its program headers; None before they are read (then every byte is searched)
        self.loads: list[tuple[int, int]] | None = None
        self.searched: list[list[int]] = []  # [start, end) searched for SO_MARK, in order

    def loaded(self, loads: list[tuple[int, ...]]) -> None:
        """The library's PT_LOAD program headers (type, flags, offset, ..., filesz, ...)."""
        self.loads = sorted((row[2], row[2] + row[5]) for row in loads if not row[1] & PF_W)

    def search(self, start: int, data: bytes, tail: bytes) -> list[int]:
        """Where ``SO_MARK`` is in the chunk ``data`` at ``start``, searched where read-only
        data can be (``to_search``: not in written segments, nor in what is not loaded, such as
        symbol tables), and where it straddles ``tail`` (the bytes before) and the chunk."""
        found = []
        at = (tail + data[: len(SO_MARK) - 1]).find(SO_MARK, max(0, len(tail) - 2))
        if 0 <= at < len(tail):
            found.append(start - len(tail) + at)
        for lo, hi in self.to_search(start, len(data)):
            with searcher(data, lo, hi) as (find, _):
                at = find(SO_MARK, lo, hi)
                while at >= 0:
                    found.append(start + at)
                    at = find(SO_MARK, at + 1, hi)
        return found

    def to_search(self, start: int, length: int) -> list[tuple[int, int]]:
        """[lo, hi) of the chunk at ``start`` to search, as offsets into it (noted searched)."""
        end = start + length
        spans = [(start, end)] if self.loads is None else self.loads
        found = []
        for first, last in spans:
            lo, hi = max(first, start), min(last, end)
            if lo < hi:
                self.note_searched(lo, hi)
                found.append((lo - start, hi - start))
        return found

    def note_searched(self, start: int, end: int) -> None:
        if self.searched and self.searched[-1][1] >= start:
            self.searched[-1][1] = max(self.searched[-1][1], end)
        else:
            self.searched.append([start, end])

    def covers(self, first: int, last: int) -> bool:
        """Whether [first, last) was searched whole."""
        return any(lo <= first and last <= hi for lo, hi in self.searched)

    def window(self, pos: int) -> tuple[int, int]:
        """(start, length) of the bytes a ``.so`` at ``pos`` is judged from."""
        start = max(0, pos - MAX_NAME)
        return start, pos - start + MATCH_SPAN

    def look(self, pos: int, start: int, data: bytes) -> None:
        """The bytes ``window`` gave for the ``.so`` at ``pos``: noted if a soname ends there."""
        match = SONAME_END.match(data, pos - start)
        if match is None:
            return
        if len(self.found) >= MAX_CANDIDATES:
            self.complete = False
            return
        self.found.append((pos, start + match.end(), start, data[: match.end()]))


def symbol_tables(rows: list[tuple[int, ...]]) -> list[tuple[int, int]]:
    """(offset, size) of a library's .dynsym and its strings (.dynstr), from the rows of its
    section table: kept where they lie after it (patchelf moves .dynstr there), for whether it
    imports dlopen and for its needed names."""
    found = []
    for row in rows:
        if row[1] == SHT_DYNSYM and row[6] < len(rows):
            found += [(row[4], row[5]), (rows[row[6]][4], rows[row[6]][5])]
    return found


def streamed_dlopens(
    candidates: SonameCandidates, kept: Kept, sections: Sections
) -> tuple[str, ...] | None:
    """The names ``dlnames.dlopened_names`` gives for the installed file: () when the image
    does not import ``dlopen``; None when what decides was not kept."""
    if not candidates.complete:
        return None
    try:
        if not imports_symbol(kept, sections, b"dlopen"):
            return ()
    except (NotRecorded, TypeError, ValueError, struct.error):
        return None
    found = sorted(candidates.found)
    starts = [at for at, _, _, _ in found]
    names: list[str] = []
    for first, last in read_only_regions(sections):
        if not candidates.covers(first, last):
            return None  # read-only data where the stream did not look (a written segment)
        for at, end, raw_at, raw in found[bisect.bisect_left(starts, first) :]:
            if at >= last:
                break
            if end > last:  # the soname runs past the section: no match there
                continue
            floor = max(first, at - MAX_NAME)
            name = name_before(raw, floor - raw_at, end - 1 - raw_at)
            if name is not None and name not in names:
                names.append(name)
                if len(names) >= MAX_NAMES:
                    return tuple(names)
    return tuple(names)


def with_dlopens(
    facts: BinaryFacts, reader: KeptReader, names: SonameCandidates | None, lost_at: int
) -> BinaryFacts:
    """``facts`` with the names a linked library may dlopen, from the strings kept as it went
    by, where the file reader (probe.binary.dlnames, which searches the bytes themselves) could
    not tell them and would for an installed file: its dynamic section read (the file reader's
    condition), and every position kept (``lost_at``: where keeping stopped)."""
    if names is None or facts.dlopens is not None or facts.needed is None:
        return facts
    if lost_at < reader.size:
        return facts
    try:
        _, sections = section_table(reader, 0, reader.size, "", only_fatbin=False)
    except (NotRecorded, ValueError, struct.error):
        return facts
    if sections is None:
        return facts
    return dataclasses.replace(facts, dlopens=streamed_dlopens(names, reader.buf, sections))


__all__ = [
    "MATCH_SPAN",
    "SO_MARK",
    "SonameCandidates",
    "streamed_dlopens",
    "symbol_tables",
    "with_dlopens",
]
