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
"""

from __future__ import annotations

import contextlib
import mmap
from typing import Any, Callable, Iterator, List, Tuple

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


__all__ = ["MAX_DATA_BYTES", "PIECE", "STRING_SECTIONS", "pieces", "read_only_regions", "readahead"]
