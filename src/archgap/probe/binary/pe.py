"""PE/COFF images (Windows DLLs, ``.pyd`` extension modules, executables): which sections hold
device code, the machine, and the DLLs the image imports.

The layout is Microsoft's "PE Format" specification (learn.microsoft.com/windows/win32/debug/
pe-format): the MS-DOS stub's ``e_lfanew`` (offset 0x3c) points at the signature ``PE\\0\\0``,
then the 20-byte COFF file header (Machine, NumberOfSections, ..., SizeOfOptionalHeader), the
optional header (magic 0x10b PE32 or 0x20b PE32+, its data directories: 1 the import table,
13 the delay-load import table) and the section table (40 bytes a section).

An image keeps section names of at most 8 bytes (the specification: executable images "do not
support section names longer than 8 characters"), so nvcc's ``.nv_fatbin`` is ``.nv_fatb`` in a
DLL and ``__nv_relfatbin`` is ``__nv_rel`` (a linker that writes longer names, as MinGW's does,
points into the COFF string table with ``/N``: read too). They are reported under their ELF names,
so the analysis reads them as it reads a shared object's: ``.nv_fatbin`` is what the runtime
registers (cuobjdump lists it), ``__nv_relfatbin`` the relocatable copy an ``-rdc`` build keeps
(read by a deep read only). A deep read also searches the initialized-data sections that are
not code, as for ELF (``deepsearch``). The containers are walked by the same ``fatcontainer``.

Every offset and size is checked against the file; a damaged image keeps what was read before the
damage, with the reason (``Reader.fail``); the section table, the import descriptors and each
name are bounded (``MAX_SECTIONS``, ``MAX_IMPORTS``, ``MAX_NAME``).
"""

from __future__ import annotations

import bisect
import struct
from typing import Dict, List, Literal, Optional, Tuple

from .binreader import NotRecorded, Reader
from .deepsearch import SEARCH_MIN, read_section

MZ_MAGIC = b"MZ"
PE_SIGNATURE = b"PE\0\0"
E_LFANEW_AT = 0x3C
# Machine (COFF file header) -> the CPU name the ELF reader reports for the same CPU, so the
# host-platform check compares them alike (the specification's "Machine Types").
MACHINES = {0x8664: "x86-64", 0xAA64: "aarch64", 0x14C: "x86", 0x1C4: "arm", 0xA641: "arm64ec"}
COFF_HEADER = struct.Struct("<HHIIIHH")  # Machine .. Characteristics (20 bytes)
SECTION = struct.Struct("<8sIIIIIIHHI")  # Name .. Characteristics (40 bytes)
PE32, PE32_PLUS = 0x10B, 0x20B
# Where, in the optional header, NumberOfRvaAndSizes and the data directories are.
DIRECTORIES_AT = {PE32: (92, 96), PE32_PLUS: (108, 112)}
IMAGE_BASE = {PE32: struct.Struct("<28xI"), PE32_PLUS: struct.Struct("<24xQ")}
IMPORT_DIRECTORY, DELAY_IMPORT_DIRECTORY = 1, 13
IMPORT_DESCRIPTOR = struct.Struct("<IIIII")  # OriginalFirstThunk, time, forwarder, Name, IAT
DELAY_DESCRIPTOR = struct.Struct("<IIIIIIII")  # Attributes, DllNameRVA, ...
SCN_CNT_CODE = 0x20
SCN_CNT_INITIALIZED_DATA = 0x40
SCN_MEM_EXECUTE = 0x20000000
# The specification allows 96 sections (COFF: "the Windows loader limits the number of sections
# to 96"); a damaged header may say up to 65,535: all are read (2.6 MB of table at most).
MAX_SECTIONS = 0xFFFF
MAX_IMPORTS = 4096  # import descriptors read per table at most (a DLL imports from ~10-100)
MAX_NAME = 256  # bytes of one DLL or section name read at most
# Names that ELF would give the sections nvcc writes, by their 8-byte PE truncation.
FATBIN_NAMES = {".nv_fatb": ".nv_fatbin", ".nv_fatbin": ".nv_fatbin",
                "__nv_rel": "__nv_relfatbin", "__nv_relfatbin": "__nv_relfatbin"}  # fmt: skip
# Sections a deep search never looks into: exception, relocation, resource, import/export and
# TLS tables, debug info, and the fatbin wrapper records (.nvFatBinSegment).
NOT_DATA_PREFIXES = (".pdata", ".xdata", ".reloc", ".rsrc", ".idata", ".edata", ".didat",
                     ".tls", ".CRT", ".debug", ".nvFatBi", ".nvHR", "__nv_mod")  # fmt: skip

# (name, characteristics, raw offset, bytes in the file, virtual address, virtual size)
Section = Tuple[str, int, int, int, int, int]


def read_pe(reader: Reader) -> Literal["pe"]:
    """Device code and imports of the PE image that is the whole of ``reader``'s bytes; the
    machine goes in ``reader.machine``, the imported DLLs in ``reader.needed``. Returns "pe"."""
    headers = _headers(reader)
    if headers is None:
        return "pe"
    optional, magic, sections = headers
    _read_imports(reader, optional, magic, sections)
    # The fatbin sections first: a container that a data section's header also covers is the
    # listed fatbin's (what the runtime registers), whichever header comes first in the table.
    to_read = sorted((s for s in sections if s[0] in FATBIN_NAMES), key=lambda s: s[2])
    if reader.deep:
        to_read += [s for s in sections if s[0] not in FATBIN_NAMES and _is_data(s)]
    for name, _, offset, raw, _, _ in to_read:
        read_section(reader, FATBIN_NAMES.get(name, name), offset, offset + raw, reader.size,
                     None, shown=name)  # fmt: skip
    return "pe"


def _is_data(section: Section) -> bool:
    """Initialized data, not code, large enough to hold a header, and not a table of the
    loader's: where a library may keep containers it loads itself."""
    name, flags, _, raw, _, _ = section
    return (
        bool(flags & SCN_CNT_INITIALIZED_DATA)
        and not flags & (SCN_CNT_CODE | SCN_MEM_EXECUTE)
        and raw >= SEARCH_MIN
        and not name.startswith(NOT_DATA_PREFIXES)
    )


def _headers(reader: Reader) -> Optional[Tuple[bytes, int, List[Section]]]:
    """(the optional header, its magic, the sections) of the image; None when its headers
    cannot be read (the reason is in ``reader``)."""
    size = reader.size
    if size < E_LFANEW_AT + 4:
        reader.fail("PE: truncated MS-DOS header (%d bytes)" % size)
        return None
    at = struct.unpack("<I", reader.buf[E_LFANEW_AT : E_LFANEW_AT + 4])[0]
    if at + 4 + COFF_HEADER.size > size:
        reader.fail("PE: the PE header (at 0x%x) is past the end" % at)
        return None
    head = bytes(reader.buf[at : at + 4 + COFF_HEADER.size])
    if head[:4] != PE_SIGNATURE:
        reader.fail("PE: no PE signature at 0x%x (an MS-DOS program, or not an image)" % at)
        return None
    machine, count, _, symbols_at, symbols, optional_size, _ = COFF_HEADER.unpack(head[4:])
    reader.machine = MACHINES.get(machine, "PE machine 0x%x" % machine)
    optional_at = at + 4 + COFF_HEADER.size
    table = optional_at + optional_size
    if table > size:
        reader.fail("PE: truncated optional header")
        return None
    optional = bytes(reader.buf[optional_at:table])
    magic = struct.unpack("<H", optional[:2])[0] if len(optional) >= 2 else 0
    if magic not in DIRECTORIES_AT:
        reader.fail("PE: unknown optional header magic 0x%x" % magic)
        magic = 0  # the sections are still read: the device code needs no directory
    available = (size - table) // SECTION.size
    if count > available:
        reader.fail("PE: truncated: %d of %d section headers present" % (available, count))
        count = available
    reader.spend(count)
    raw = bytes(reader.buf[table : table + count * SECTION.size])
    strings = _string_table(reader, symbols_at, symbols)
    sections = []
    for i in range(min(count, MAX_SECTIONS)):
        fields = SECTION.unpack_from(raw, i * SECTION.size)
        name, vsize, vaddr, rsize, rptr, flags = fields[:5] + fields[9:]
        text = _section_name(reader, name, strings)
        # The loader maps VirtualSize bytes: raw bytes past it are file-alignment padding.
        in_file = min(rsize, vsize) if vsize else rsize
        sections.append((text, flags, rptr, in_file, vaddr, max(vsize, rsize)))
    return optional, magic, sections


def _string_table(reader: Reader, symbols_at: int, symbols: int) -> Tuple[int, int]:
    """[start, end) of the COFF string table (after the symbol table, 18 bytes a symbol), where
    a long section name ``/N`` points; (0, 0) where there is none in the file."""
    start = symbols_at + symbols * 18
    if not symbols_at or start + 4 > reader.size:
        return 0, 0
    length = struct.unpack("<I", reader.buf[start : start + 4])[0]
    return start, min(start + length, reader.size)


def _section_name(reader: Reader, raw: bytes, strings: Tuple[int, int]) -> str:
    """A section's name: its 8 bytes, or for ``/N`` the string at offset N of the string table
    (the name as it is when N is not a number or lies outside the table)."""
    name = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
    start, end = strings
    if not name.startswith("/") or not name[1:].isdigit() or not start:
        return name
    at = start + int(name[1:])
    if at >= end:
        return name
    piece = bytes(reader.buf[at : min(end, at + MAX_NAME)])
    return piece.split(b"\0", 1)[0].decode("utf-8", "replace") or name


def _read_imports(reader: Reader, optional: bytes, magic: int, sections: List[Section]) -> None:
    """The DLLs the image imports (import and delay-load import tables), in table order, each
    once, into ``reader.needed``; None when the tables cannot be read. A damaged table is a
    reason: Windows' loader refuses such an image as well."""
    if magic not in DIRECTORIES_AT:
        return
    count_at, first = DIRECTORIES_AT[magic]
    if len(optional) < count_at + 4:
        reader.fail("PE: truncated optional header")
        return
    directories = struct.unpack("<I", optional[count_at : count_at + 4])[0]
    image_base = IMAGE_BASE[magic].unpack(optional[: IMAGE_BASE[magic].size])[0]
    present = min(directories, (len(optional) - first) // 8)
    spans = Layout(sections)
    try:
        names: List[str] = []
        for index, layout in ((IMPORT_DIRECTORY, IMPORT_DESCRIPTOR),
                              (DELAY_IMPORT_DIRECTORY, DELAY_DESCRIPTOR)):  # fmt: skip
            if index >= present:
                continue
            rva = struct.unpack("<I", optional[first + index * 8 : first + index * 8 + 4])[0]
            if rva:
                names += _table(reader, spans, rva, layout, index, image_base)
    except NotRecorded:  # a streamed member's tables were not kept: nothing claimed
        reader.needed = None
        return
    seen: Dict[str, None] = {}
    for name in names:
        seen.setdefault(name, None)
    reader.needed = tuple(seen)


def _table(
    reader: Reader,
    spans: Layout,
    rva: int,
    layout: struct.Struct,
    index: int,
    image_base: int,
) -> List[str]:
    """The DLL names of one import table (descriptors until an all-zero one)."""
    what = "import" if index == IMPORT_DIRECTORY else "delay-load import"
    names: List[str] = []
    for i in range(MAX_IMPORTS + 1):
        if i == MAX_IMPORTS:
            reader.fail("PE: the %s table has no end within %d descriptors: the first %d are "
                        "read" % (what, MAX_IMPORTS, MAX_IMPORTS))  # fmt: skip
            break
        reader.spend(1)
        found = spans.offset(rva + i * layout.size, layout.size, reader.size)
        if found is None:
            reader.fail("PE: the %s table (RVA 0x%x) is outside the file's sections"
                        % (what, rva + i * layout.size))  # fmt: skip
            break
        at = found[0]
        fields = layout.unpack(bytes(reader.buf[at : at + layout.size]))
        if not any(fields):
            break
        name_rva = fields[3] if index == IMPORT_DIRECTORY else fields[1]
        if index == DELAY_IMPORT_DIRECTORY and not fields[0] & 1 and name_rva >= image_base:
            name_rva -= image_base  # version 1 (attributes 0) held addresses, not RVAs
        name = _name_at(reader, spans, name_rva)
        if name is None:
            reader.fail("PE: a %s name (RVA 0x%x) is outside the file's sections"
                        % (what, name_rva))  # fmt: skip
            continue
        names.append(name)
    return names


class Layout:
    """Where the image's RVAs lie in the file: its sections sorted by virtual address, found by
    bisection (a damaged header may list 65,535 sections, and each import a name)."""

    def __init__(self, sections: List[Section]) -> None:
        self.spans = sorted((s[4], s[4] + s[3], s[2]) for s in sections)  # (va, va end, raw)
        self.starts = [span[0] for span in self.spans]

    def offset(self, rva: int, length: int, size: int) -> Optional[Tuple[int, int]]:
        """(file offset, where its section's bytes end) of ``length`` bytes at ``rva``, in the
        section whose raw data holds them; None when none does (bytes the loader zero-fills,
        beyond every section, or past the end of the file)."""
        i = bisect.bisect_right(self.starts, rva) - 1
        if i < 0:
            return None
        start, stop, pointer = self.spans[i]
        if rva + length > stop:
            return None
        at = pointer + rva - start
        end = min(pointer + stop - start, size)
        return (at, end) if at + length <= end else None


def _name_at(reader: Reader, layout: Layout, rva: int) -> Optional[str]:
    """The NUL-ended name at ``rva``, ``MAX_NAME`` bytes at most, not past its section."""
    found = layout.offset(rva, 1, reader.size)
    if found is None:
        return None
    at, end = found
    piece = bytes(reader.buf[at : min(end, at + MAX_NAME)])
    return piece.split(b"\0", 1)[0].decode("ascii", "replace")


__all__ = ["MACHINES", "MZ_MAGIC", "read_pe"]
