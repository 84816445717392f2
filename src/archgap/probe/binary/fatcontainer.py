"""Fatbin containers and their entries (SASS, PTX, LTO-IR), read from their headers.

A container is a 16-byte header and entries back to back; an entry is a 64..144-byte header and
its payload (docs/reference/fatbin-format.md). The kind, architecture, variant, PTX ISA,
compression and sizes all come from the header; only a small entry's content is looked at,
for whether it holds a kernel (``content.has_kernel``). Sizes no compressor can give make an
entry invalid, with the reason.
"""

from __future__ import annotations

import mmap
import struct
from typing import Any, Callable, List, Optional, Tuple

from .binreader import SEARCH_WINDOW, TOOLKIT_READS, NotRecorded, Reader
from .content import PREFIX_STORED, has_kernel, is_relocatable, packed_toolkit
from .elf import cubin_has_text, cubin_toolkit

CONTAINER_MAGIC = b"\x50\xed\x55\xba"  # 0xBA55ED50 little-endian
KERNEL_CHECK_MAX = 64 << 10  # entries up to this size unpacked are looked at for a kernel

ENTRY_KINDS = {1: "ptx", 2: "sass", 8: "ltoir"}
FLAG_DEBUG = 0x2
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY = 0x200000

CONTAINER_HEADER = struct.Struct("<4sHHQ")  # magic, version, header size, bytes of entries
# kind, version, header size, payload size, compressed size, options offset, minor, major, arch,
# name offset, name length, flags, reserved, uncompressed size
ENTRY_HEADER = struct.Struct("<HHIQIIHHIIIQQQ")
MAX_ENTRY_HEADER = 4096  # 64..144 seen; anything far larger is garbage, not a header
# Entry sizes that cannot be: an LZ4 block expands at most ~255x and a Zstandard block
# (128 KiB from a few bytes) ~2^15x; nothing unpacks to more than this many bytes.
MAX_EXPANSION = 1 << 16
MAX_UNPACKED = 1 << 40


def walk_containers(
    reader: Reader, start: int, end: int, section: str, listed: bool, member: Optional[str]
) -> None:
    """Containers laid back to back in [start, end) (``.nv_fatbin``, a ``.fatbin`` file)."""
    label = section or "fatbin"
    pos = start
    released = start - start % mmap.PAGESIZE
    while pos + CONTAINER_HEADER.size <= end:
        if pos - released >= SEARCH_WINDOW:  # each header read maps ~64 KiB around it
            released = reader.release(released, pos)
        head = reader.header(pos, CONTAINER_HEADER.size)
        if head[:4] != CONTAINER_MAGIC:
            found = reader.find(CONTAINER_MAGIC, pos, end)
            stop = end if found < 0 else found
            if not reader.is_zero(pos, stop):
                reader.fail("%s: unrecognised bytes at 0x%x" % (label, pos))
            if found < 0:
                return
            pos = found
            continue
        _, version, header_size, fat_size = CONTAINER_HEADER.unpack(head)
        if version != 1 or header_size != CONTAINER_HEADER.size:
            reader.fail(
                "%s: invalid container header at 0x%x (version %d, header size %d)"
                % (label, pos, version, header_size)
            )
            pos += 4
            continue
        body = pos + header_size
        container_end = body + fat_size
        if container_end > end:
            reader.fail(
                "%s: container at 0x%x runs 0x%x bytes past the end"
                % (label, pos, container_end - end)
            )
            container_end = end
        if pos in reader.seen_containers:  # another header pointed here: read already
            pos = max(container_end, reader.seen_containers[pos])
            continue
        reader.seen_containers[pos] = container_end
        walk_entries(reader, body, container_end, section, listed, member)
        pos = container_end
    if pos < end and not reader.is_zero(pos, end):
        reader.fail("%s: unrecognised bytes at 0x%x" % (label, pos))


def walk_entries(
    reader: Reader, pos: int, end: int, section: str, listed: bool, member: Optional[str]
) -> None:
    """The entries of one container in [pos, end). A container outside the listed fatbin (a
    deep search's) is told whole, each entry marked with whether the container's cubins are
    relocatable (``content.is_relocatable``: nvcc -rdc output, a device-link input that nothing
    loads as it is); the listed fatbin's entries are told as they are read, unmarked."""
    if listed:
        _walk_entries(reader, pos, end, section, True, member, reader.found)
        return
    entries: List[List[Any]] = []
    relocatable: List[Optional[bool]] = [None]

    def keep(*fields: Any) -> None:
        entries.append([*fields, None])  # KernelEntry's fields; relocatable last, told below

    _walk_entries(reader, pos, end, section, False, member, keep, relocatable)
    found: Callable[..., None] = reader.found
    for fields in entries:
        fields[-1] = relocatable[0]
        found(*fields)


def _walk_entries(
    reader: Reader,
    pos: int,
    end: int,
    section: str,
    listed: bool,
    member: Optional[str],
    found: Callable[..., None],
    relocatable: Optional[List[Optional[bool]]] = None,
) -> None:
    label = section or "fatbin"
    released = pos - pos % mmap.PAGESIZE
    noted = False  # a cubin of this container was looked at for its toolkit note
    while pos + ENTRY_HEADER.size <= end:
        if pos in reader.seen_entries:  # the rest of this chain was read from another start
            return
        if pos - released >= SEARCH_WINDOW:  # each header read maps ~64 KiB around it
            released = reader.release(released, pos)
        reader.spend(1)
        head = reader.header(pos, ENTRY_HEADER.size)
        (kind_code, _, header_size, payload_size, compressed_size, _, minor, major, arch,
         _, _, flags, _, uncompressed) = ENTRY_HEADER.unpack(head)  # fmt: skip
        kind = ENTRY_KINDS.get(kind_code)
        payload = pos + header_size
        if kind is None or not _header_fits(header_size, payload + payload_size, end):
            _invalid_header(reader, kind_code, pos, end, label)
            return
        compression = _compression(flags, compressed_size)
        stored, unpacked = _sizes(payload_size, compressed_size, uncompressed)
        impossible = _impossible_sizes(payload_size, compressed_size, uncompressed)
        if impossible:
            reader.fail("%s: invalid entry at 0x%x: %s" % (label, pos, impossible))
            pos = payload + payload_size
            continue
        reader.seen_entries.add(pos)
        kernels = None
        if unpacked <= KERNEL_CHECK_MAX and kind != "ltoir":  # only these can be nvlink's stubs
            same = (kind, arch, flags & (FLAG_ARCH_SPECIFIC | FLAG_FAMILY), section, listed, member)
            kernels = _kernels(reader, payload, stored, unpacked, kind, compression, same)
        if kind == "sass":
            noted = _sass_entry(reader, noted, relocatable, payload, stored, unpacked, compression)
        # KernelEntry's fields in order, positional: a call with keywords costs twice as much.
        found(
            kind,
            arch,
            _variant(flags),
            "%d.%d" % (major, minor) if kind == "ptx" else None,
            compression,
            stored,
            unpacked,
            section,
            pos,
            bool(flags & FLAG_DEBUG),
            listed and kind != "ltoir",
            member,
            1,
            kernels,
        )
        pos = payload + payload_size
    if pos < end and not reader.is_zero(pos, end):
        reader.fail("%s: truncated entry header at 0x%x" % (label, pos))


def _invalid_header(reader: Reader, kind_code: int, pos: int, end: int, label: str) -> None:
    """Report the entry header at ``pos`` as invalid, unless it and the rest are zeros (the
    padding after the last entry)."""
    if not (kind_code == 0 and reader.is_zero(pos, end)):
        reader.fail("%s: invalid entry header at 0x%x" % (label, pos))


def _sizes(payload_size: int, compressed_size: int, uncompressed: int) -> Tuple[int, int]:
    """(bytes stored, bytes unpacked) of an entry."""
    stored = compressed_size if compressed_size else payload_size
    return stored, uncompressed if compressed_size and uncompressed else stored


def _variant(flags: int) -> str:
    """The variant an entry's flags name: 'a' (arch-specific), 'f' (family) or ''."""
    return "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY else ""


def _header_fits(header_size: int, payload_end: int, end: int) -> bool:
    """Whether an entry header of a known kind is one: its size in bounds, its payload inside
    the container."""
    return ENTRY_HEADER.size <= header_size <= MAX_ENTRY_HEADER and payload_end <= end


def _compression(flags: int, compressed_size: int) -> str:
    """The compression an entry's flags name ("unknown": compressed, by neither flag)."""
    if flags & FLAG_ZSTD:
        return "zstd"
    if flags & FLAG_LZ4:
        return "lz4"
    return "unknown" if compressed_size else "none"


def _sass_entry(
    reader: Reader,
    noted: bool,
    relocatable: Optional[List[Optional[bool]]],
    payload: int,
    stored: int,
    unpacked: int,
    compression: str,
) -> bool:
    """What a SASS entry tells of its container: the toolkit its note names (read from the
    first uncompressed cubin, unless ``noted``) and, when ``relocatable`` asks and is not yet
    told, whether it is a relocatable object. Returns whether a cubin's note was looked at."""
    if not noted and compression in ("none", "lz4", "zstd"):
        noted = _toolkit_note(reader, payload, stored, unpacked, compression)
    if relocatable is not None and relocatable[0] is None:
        relocatable[0] = _relocatable(reader, payload, stored, unpacked, compression)
    return noted


def _kernels(
    reader: Reader,
    payload: int,
    stored: int,
    unpacked: int,
    kind: str,
    compression: str,
    same: Tuple[Any, ...],
) -> Optional[bool]:
    """Whether a small SASS or PTX entry holds a kernel; an entry like one shown to hold a
    kernel (``same``) is not unpacked again (~1 ms each): it changes no verdict."""
    if kind == "sass" and compression == "none":  # its tables, in place
        kernels = cubin_has_text(reader.buf, payload, payload + stored)
    elif same in reader.with_kernels:
        return None
    else:
        kernels = has_kernel(reader.buf, payload, stored, unpacked, kind, compression)
    if kernels:
        reader.with_kernels.add(same)
    return kernels


def _toolkit_note(
    reader: Reader, payload: int, stored: int, unpacked: int, compression: str
) -> bool:
    """Record the toolkit that the cubin at ``payload`` names in its ``.note.nv.tkinfo`` (of a
    compressed one, in its first unpacked bytes: content.packed_toolkit), while fewer than
    ``TOOLKIT_READS`` cubins of the file were looked at. Returns whether the container needs no
    more looks: a note was found (CUDA 12.8 wrote one only in its sm_100 and newer cubins), or
    the file's looks are spent."""
    if reader.toolkit_reads >= TOOLKIT_READS:
        return True
    reader.toolkit_reads += 1
    reader.spend(1)
    try:
        if compression == "none":
            release = cubin_toolkit(reader.buf, payload, payload + stored)
        else:
            release = packed_toolkit(reader.buf, payload, stored, unpacked, compression)
    except NotRecorded:  # a streamed member's bytes not kept: nothing claimed
        return False
    if release is None:
        return False
    reader.toolkits.add(release)
    return True


def _relocatable(
    reader: Reader, payload: int, stored: int, unpacked: int, compression: str
) -> Optional[bool]:
    """Whether the cubin at ``payload`` is relocatable; None when that cannot be read here."""
    if compression not in ("none", "lz4"):
        return None
    try:
        head = reader.header(payload, min(stored, PREFIX_STORED))
    except NotRecorded:
        return None
    return is_relocatable(head, 0, len(head), unpacked, compression)


def _impossible_sizes(payload_size: int, compressed_size: int, uncompressed: int) -> str:
    """Why an entry's sizes cannot be (compressed bytes past the payload, an expansion no
    compressor reaches), or ""."""
    if not compressed_size:
        return ""
    if compressed_size > payload_size:
        return "%d compressed bytes in a %d-byte payload" % (compressed_size, payload_size)
    if uncompressed > min(compressed_size * MAX_EXPANSION, MAX_UNPACKED):
        return "%d bytes would unpack to %d" % (compressed_size, uncompressed)
    return ""
