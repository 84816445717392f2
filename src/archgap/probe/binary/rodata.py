"""The read-only data of a linked host ELF image: where its strings are searched for.

probe.binary.dlnames (the sonames it may ``dlopen``) and probe.binary.rtcompilers (a run-time
compiler's marks) search the same bytes: each allocated section that is neither written nor
executed, without the fatbins (device code: ``elf.py`` reads their cubins' notes) and the
dynamic linker's tables, ``MAX_DATA_BYTES`` per image at most. The image's mapping is
``MADV_RANDOM`` (probe.binary.fatbin: a header read maps one page); a range searched front to
back gets the kernel's read-ahead and fault-around back first (``readahead``), and its pages are
handed back once after the last search (binreader.release; the page cache keeps them).
"""

from __future__ import annotations

import contextlib
import mmap
from typing import Any, List, Tuple

from .elf import SHF_EXECINSTR, SHT_PROGBITS, Sections

SHF_WRITE, SHF_ALLOC = 0x1, 0x2
MAX_DATA_BYTES = 1 << 30  # read-only data searched at most per image
# read-only sections that hold no strings a program passes to dlopen, nor compiler tables
NOT_DATA = (b".nv_fatbin", b"__nv_relfatbin", b".eh_frame", b".gcc_except_table", b".note",
            b".interp", b".gnu", b".dynstr", b".dynsym", b".rela", b".rel.", b".hash")  # fmt: skip


def read_only_regions(sections: Sections) -> List[Tuple[int, int]]:
    """[start, end) of each read-only data section to search, in table order."""
    regions: List[Tuple[int, int]] = []
    budget = MAX_DATA_BYTES
    for i, (kind, flags) in enumerate(zip(sections.types, sections.flags)):
        if kind != SHT_PROGBITS or flags & (SHF_WRITE | SHF_EXECINSTR) or not flags & SHF_ALLOC:
            continue
        if sections.name(i).encode("utf-8", "replace").startswith(NOT_DATA) or budget <= 0:
            continue
        size = min(sections.sizes[i], budget)
        budget -= size
        regions.append((sections.offsets[i], sections.offsets[i] + size))
    return regions


def readahead(buf: Any, start: int, end: int) -> None:
    """Undo the mapping's ``MADV_RANDOM`` on [start, end), which is read front to back: one
    fault maps many pages (page by page, the faults of ~600 MB cost ~0.2 s of CPU)."""
    if hasattr(buf, "madvise"):
        aligned = start - start % mmap.PAGESIZE
        with contextlib.suppress(OSError, ValueError, AttributeError):
            buf.madvise(mmap.MADV_NORMAL, aligned, end - aligned)


__all__ = ["MAX_DATA_BYTES", "NOT_DATA", "read_only_regions", "readahead"]
