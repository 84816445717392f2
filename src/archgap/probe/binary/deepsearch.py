"""The deep search: fatbin containers and bare cubins inside data sections.

Libraries such as cuBLASLt (``.cask_resource``), cuFFT (``.ldata``) and cuDNN keep device code in
data sections that they load themselves and cuobjdump never lists. ``search_section`` finds it
by searching for the container magic and the cubin ELF ident (``bytesearch``: both in one scan
with Hyperscan where it is installed, else libc's memmem, ~3x Python's find); every candidate
header is validated before it counts, so a stray magic number is no hit.
"""

from __future__ import annotations

import contextlib
import mmap
import struct
from typing import Optional

from .binreader import SEARCH_WINDOW, Reader
from .bytesearch import Find, searcher
from .elf import CUBIN_IDENT, cubin_at
from .fatcontainer import (
    CONTAINER_HEADER,
    CONTAINER_MAGIC,
    ENTRY_HEADER,
    ENTRY_KINDS,
    MAX_ENTRY_HEADER,
    walk_containers,
    walk_entries,
)

READAHEAD_MIN = 1 << 20  # searched ranges at least this large get the kernel's read-ahead back
# The fewest bytes that hold a header the search accepts: a container header and one entry
# header (_container_at); a cubin takes more (a 64-byte ELF header and two section headers).
SEARCH_MIN = CONTAINER_HEADER.size + ENTRY_HEADER.size
# What memmem searches for: the container header up to its size field (version 1, 16 bytes:
# _container_at accepts nothing else). memmem skips faster by a longer needle (4.2 vs
# 3.2 GB/s); Python's find slower (1.1 vs 1.5 GB/s: zero bytes fill data sections), so it
# searches the 4-byte magic.
CONTAINER_START = CONTAINER_MAGIC + struct.pack("<HH", 1, CONTAINER_HEADER.size)
# What _container_at checks: a container header (magic, version, header size, size of its
# entries) and the start of its first entry's (kind, version, header size, payload size).
FIRST = struct.Struct("<4sHHQHHIQ")
# Zero bytes looked past for the next container's magic before searching: cuFFT pads its 24,000
# containers in .ldata to 16 bytes; one search call each was a quarter of its deep read.
PADDING_PEEK = 64


def read_section(
    reader: Reader,
    name: str,
    offset: int,
    end: int,
    limit: int,
    member: Optional[str],
    is_object: bool = False,
    where: str = "",
    shown: Optional[str] = None,
) -> None:
    """The device code of one section of a host image (ELF or PE) in ``[offset, end)``, the
    image ending at ``limit``: the listed fatbin is walked as listed, the relocatable copy
    (``__nv_relfatbin``) only in an object or a deep read, any other section searched. A
    section past the image's end is read up to it (and said so); one read already through
    another header is not read again. ``shown``: the name as the image spells it (a PE keeps 8
    bytes of a section name), for the message."""
    if end > limit:
        reader.fail("%struncated: section %s ends 0x%x bytes past the end"
                    % (where, shown or name, end - limit))  # fmt: skip
        end = limit
    if offset >= end or (offset, end) in reader.seen_regions:
        return  # empty, or read already through another header
    reader.seen_regions.add((offset, end))
    if name == ".nv_fatbin":
        walk_containers(reader, offset, end, name, True, member)
    elif name == "__nv_relfatbin":
        # cuobjdump lists the relocatable fatbins of objects, not of linked binaries.
        if is_object or reader.deep:
            walk_containers(reader, offset, end, name, is_object, member)
    else:
        search_section(reader, offset, end, name, member)
    if end - offset >= READAHEAD_MIN:  # the pages of a big section, read: handed back
        reader.release(offset - offset % mmap.PAGESIZE, end)


def search_section(
    reader: Reader, start: int, end: int, section: str, member: Optional[str]
) -> None:
    """Validated containers and bare cubins in [start, end): device code cuobjdump skips.

    Two searches cover the bytes between containers: one for the container magic, one for
    the cubin ELF ident. Containers themselves are never searched: a valid one is skipped
    by its size, so back-to-back containers (cuFFT's .ldata, cuBLASLt's .cask_resource)
    cost one header read each and no scan."""
    buf = reader.buf
    if end - start >= READAHEAD_MIN and hasattr(buf, "madvise"):
        # This range is read front to back: undo the file's MADV_RANDOM here so a cold cache
        # reads ahead (4x faster cold on cuBLASLt). Not MADV_SEQUENTIAL: pages touched through
        # such a mapping count as unused and are reclaimed first, making the next run cold.
        aligned = start - start % mmap.PAGESIZE
        with contextlib.suppress(OSError, ValueError, AttributeError):
            buf.madvise(mmap.MADV_NORMAL, aligned, end - aligned)
    with searcher(buf, start, end, (CONTAINER_START, CUBIN_IDENT)) as (find, fast):
        _search(
            reader, start, end, section, member, find, CONTAINER_START if fast else CONTAINER_MAGIC
        )


def _search(
    reader: Reader,
    start: int,
    end: int,
    section: str,
    member: Optional[str],
    find: Find,
    magic: bytes,
) -> None:
    pos = start
    released = start - start % mmap.PAGESIZE  # pages before this were handed back
    while pos < end:
        if pos - released >= SEARCH_WINDOW:
            released = reader.release(released, pos)
        # The next container follows the last one directly or after zero padding: no search
        # (zero bytes hold neither needle).
        hit = reader.padded_magic(pos, min(pos + PADDING_PEEK, end), CONTAINER_MAGIC)
        if hit < 0:
            pos, data_end = reader.data_at(pos, end)  # holes of a sparse file hold nothing
            if pos >= end:
                break
            # One window at a time; a header that starts in it may end past it.
            window_end = min(data_end, pos + SEARCH_WINDOW)
            hit = find(magic, pos, min(data_end, window_end + len(magic) - 1))
            gap_end = window_end if hit < 0 else hit
            # The cubin ident search covers the same bytes: idents that start before
            # gap_end (with no container in the window, one may end past it).
            ident_end = min(data_end, gap_end + len(CUBIN_IDENT) - 1) if hit < 0 else hit
            reader.spend((gap_end - pos) >> 9)  # two searches: one unit per KiB each
            # A valid container is rarely inside a cubin; cubins end where their sections do.
            cubin = find(CUBIN_IDENT, pos, ident_end)
            while cubin >= 0:
                cubin_end = cubin_at(reader, cubin, end, section, False, member)
                if cubin_end > gap_end:  # the container candidate was inside this cubin
                    break
                next_from = cubin_end if cubin_end > cubin else cubin + 1
                cubin = find(CUBIN_IDENT, next_from, ident_end)
            else:
                cubin_end = -1
            if cubin_end > gap_end:
                pos = cubin_end
                continue
            if hit < 0:
                pos = window_end
                continue
        fat_size = _container_at(reader, hit, end)
        if fat_size >= 0:
            body = hit + CONTAINER_HEADER.size
            if hit not in reader.seen_containers:
                reader.seen_containers[hit] = body + fat_size
                walk_entries(reader, body, body + fat_size, section, False, member)
            pos = body + fat_size
        else:
            pos = hit + 1


def _container_at(reader: Reader, pos: int, end: int) -> int:
    """The size of the entries of a valid container at ``pos`` (strict: its header and the
    first entry's), or -1. One ``header`` read of both: a pread, not a page fault, for a file."""
    if pos + CONTAINER_HEADER.size + ENTRY_HEADER.size > end:
        return -1
    head = reader.header(pos, FIRST.size)
    if len(head) < FIRST.size:
        return -1
    magic, version, header_size, fat_size, kind, entry_version, entry_header, payload_size = (
        FIRST.unpack(head)
    )
    valid = (
        magic == CONTAINER_MAGIC
        and version == 1
        and header_size == CONTAINER_HEADER.size
        and ENTRY_HEADER.size <= fat_size <= end - pos - CONTAINER_HEADER.size
        and kind in ENTRY_KINDS
        and entry_version == 0x0101
        and ENTRY_HEADER.size <= entry_header <= MAX_ENTRY_HEADER
        and entry_header % 8 == 0
        and entry_header + payload_size <= fat_size
    )
    return fat_size if valid else -1
