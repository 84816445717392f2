"""The read-only data of a linked host ELF image: where its strings are searched for.

probe.binary.dlnames (the sonames it may ``dlopen``) and probe.binary.rtcompilers (a run-time
compiler's marks) search the same bytes: the sections a compiler puts string literals in, as
the linker names them — ``.rodata`` (GCC and Clang emit literals to ``.rodata.str*`` and
``.rodata.*``; the default linker scripts of GNU ld, gold and lld gather those into ``.rodata``)
and ``.lrodata`` (x86-64 medium and large code models: cuFFT 12.0 keeps its ``libnvrtc.so.13``
there) — allocated, neither written nor executed, ``MAX_DATA_BYTES`` per image at most. A
section the program names itself holds the data it put there (cuBLASLt's and cuSPARSELt's
``.cask_resource``: fatbin containers and their tables, 200 of the 619 MB of read-only data in
torch 2.14.1+cu130's site-packages); on that environment and every ELF file of tests/.data
(52,328 files) the names and compilers found are the same as over all read-only data.

The image's mapping is ``MADV_RANDOM`` (probe.binary.fatbin: a header read maps one page); a
range searched front to back gets the kernel's read-ahead and fault-around back first
(``readahead``). Each search walks the ranges in ``pieces`` of ``PIECE`` bytes and hands each
piece's pages back before the next (binreader.release; the page cache keeps them): a section
that claims a gigabyte (a hole in a sparse file) never holds more than a piece mapped.

The three readers of a linked image's strings (dlnames, rtcompilers, banner) search it in one
pass (``search_all``): each piece is read ahead, searched for every mark (bytesearch: all marks
in one scan with Hyperscan where it is installed, else ``memmem`` per mark) and handed back once,
where three passes faulted the same pages in three times (the banner's without read-ahead, a
page per fault). What each reader finds is the same: the
marks' places in each region, in table order, and then the reader's own rules at each place.
"""

from __future__ import annotations

import contextlib
import mmap
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from .binreader import NotRecorded, Reader
from .bytesearch import searcher
from .elf import SHF_EXECINSTR, SHT_PROGBITS, Sections

SHF_WRITE, SHF_ALLOC = 0x1, 0x2
MAX_DATA_BYTES = 1 << 30  # read-only data searched at most per image
STRING_SECTIONS = (".rodata", ".lrodata")  # the linker's names of the literals' sections
PIECE = 16 << 20  # bytes of a range searched (and so mapped) at once
OVERLAP = 4096  # bytes past a piece a string that starts in it may run on


def _string_section(name: str) -> bool:
    return name.startswith(STRING_SECTIONS)


def read_only_regions(
    sections: Sections, wanted: Callable[[str], bool] = _string_section
) -> List[Tuple[int, int]]:
    """[start, end) of each read-only data section to search (by default the literals'
    sections; ``wanted`` says which by name), in table order, ``MAX_DATA_BYTES`` in all."""
    regions: List[Tuple[int, int]] = []
    budget = MAX_DATA_BYTES
    for i, (kind, flags) in enumerate(zip(sections.types, sections.flags)):
        if kind != SHT_PROGBITS or flags & (SHF_WRITE | SHF_EXECINSTR) or not flags & SHF_ALLOC:
            continue
        if budget <= 0 or not wanted(sections.name(i)):
            continue
        size = min(sections.sizes[i], budget)
        budget -= size
        regions.append((sections.offsets[i], sections.offsets[i] + size))
    return regions


def pieces(regions: List[Tuple[int, int]]) -> Iterator[Tuple[int, int, int, int]]:
    """Each region in pieces: (region start, piece start, piece stop, end), where a string
    that starts in [piece start, piece stop) is read up to ``end`` (``OVERLAP`` past the stop,
    within the region); the next piece begins at the stop."""
    for first, last in regions:
        at = first
        while at < last:
            stop = min(last, at + PIECE)
            yield first, at, stop, min(last, stop + OVERLAP)
            at = stop


def readahead(buf: Any, start: int, end: int) -> None:
    """Undo the mapping's ``MADV_RANDOM`` on [start, end), which is read front to back: one
    fault maps many pages (page by page, the faults of ~600 MB cost ~0.2 s of CPU)."""
    if hasattr(buf, "madvise"):
        aligned = start - start % mmap.PAGESIZE
        with contextlib.suppress(OSError, ValueError, AttributeError):
            buf.madvise(mmap.MADV_NORMAL, aligned, end - aligned)


Region = Tuple[int, int]
# the errors of a buffer that does not hold the bytes asked for (a streamed member's, not kept)
UNREAD = (NotRecorded, TypeError, ValueError)


class Search:
    """One mark looked for in some regions: where it starts (``hits``: offset, and the region
    [first, last) it lies in; at most ``limit``, in the regions' order), or ``failed`` when the
    buffer could not be searched (a streamed member's bytes were not kept)."""

    def __init__(self, mark: bytes, regions: List[Region], limit: int) -> None:
        self.mark = mark
        self.regions = regions
        self.limit = limit
        self.hits: List[Tuple[int, int, int]] = []
        self.failed = False

    def done(self) -> bool:
        return self.failed or len(self.hits) >= self.limit


def search_all(reader: Reader, searches: List[Search]) -> None:
    """Each search's hits, in one pass over the regions of all of them: each piece of a region
    read ahead, searched for the mark of every search that has that region and is not done,
    then handed back (the page cache keeps it). A mark found is one that starts in the piece."""
    buf = reader.buf
    # each region once, in the section table's order (each search's regions are in it; a
    # search's may be a subset of another's: the longest first)
    wanted: Dict[Region, List[Search]] = {}
    for search in sorted(searches, key=lambda s: -len(s.regions)):
        for region in search.regions:
            wanted.setdefault(region, []).append(search)
    for region, its in wanted.items():
        for _, start, stop, end in pieces([region]):
            live = [s for s in its if not s.done()]
            if not live:
                break
            readahead(buf, start, end)
            with searcher(buf, start, end, [s.mark for s in live]) as (find, _):
                for search in live:
                    _hits(search, find, region, start, stop, end)
            reader.release(start - start % mmap.PAGESIZE, stop)
    for search in searches:  # in each search's own order of regions (the section table's)
        order = {region: i for i, region in enumerate(search.regions)}
        search.hits.sort(key=lambda hit: (order[(hit[1], hit[2])], hit[0]))
        del search.hits[search.limit :]


def _hits(search: Search, find: Any, region: Region, start: int, stop: int, end: int) -> None:
    """The places ``search``'s mark starts in [start, stop) (read up to ``end``)."""
    mark = search.mark
    try:
        at = find(mark, start, end)
        while 0 <= at < stop and len(search.hits) < search.limit:
            search.hits.append((at, region[0], region[1]))
            at = find(mark, at + 1, end)
    except UNREAD:
        search.failed = True


def search_one(reader: Reader, search: Search) -> Optional[Search]:
    """One search alone (``search_all``): itself, or None when the bytes could not be searched."""
    search_all(reader, [search])
    return None if search.failed else search


__all__ = [
    "MAX_DATA_BYTES", "PIECE", "STRING_SECTIONS", "Search", "pieces", "read_only_regions",
    "readahead", "search_all", "search_one",
]  # fmt: skip
