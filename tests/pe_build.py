"""PE/COFF images built from Microsoft's "PE Format" specification (learn.microsoft.com/windows/
win32/debug/pe-format), field by field, for the PE reader's tests; and an independent parser of the
same fields (``spec_sections``, ``spec_imports``) written from the specification's offsets, not
from the reader.

Offsets used (the specification's): the MS-DOS header's e_lfanew at 0x3C; the signature
``PE\\0\\0``; the COFF file header (20 bytes: Machine +0, NumberOfSections +2, PointerToSymbolTable
+8, NumberOfSymbols +12, SizeOfOptionalHeader +16); the PE32+ optional header (Magic 0x20B +0,
ImageBase +24, SectionAlignment +32, FileAlignment +36, SizeOfImage +56, SizeOfHeaders +60,
NumberOfRvaAndSizes +108, data directories from +112, 8 bytes each: 1 import, 13 delay import);
a section header (40 bytes: Name +0, VirtualSize +8, VirtualAddress +12, SizeOfRawData +16,
PointerToRawData +20, Characteristics +36); an import directory entry (20 bytes, Name RVA +12);
a delay-load directory entry (32 bytes, Attributes +0 (1: RVAs), Name RVA +4).
"""

from __future__ import annotations

import struct
from typing import Any

E_LFANEW = 0x80
COFF_AT = E_LFANEW + 4
OPTIONAL_AT = COFF_AT + 20
OPTIONAL_SIZE = 112 + 16 * 8  # PE32+ with 16 data directories
TABLE_AT = OPTIONAL_AT + OPTIONAL_SIZE
FILE_ALIGN, SECTION_ALIGN = 0x200, 0x1000
DATA = 0x40 | 0x40000000  # IMAGE_SCN_CNT_INITIALIZED_DATA | MEM_READ
CODE = 0x20 | 0x20000000 | 0x40000000  # CNT_CODE | MEM_EXECUTE | MEM_READ
IMAGE_BASE = 0x180000000


def _align(value: int, to: int) -> int:
    return (value + to - 1) // to * to


def pe_image(
    sections: list[tuple[bytes, bytes, int]],
    imports: tuple[str, ...] = (),
    delay: tuple[str, ...] = (),
    machine: int = 0x8664,
) -> bytes:
    """A PE32+ DLL with ``sections`` (name, bytes, characteristics) and an ``.idata`` section
    (last) holding an import table of ``imports`` and a delay-load table of ``delay``."""
    count = len(sections) + (1 if imports or delay else 0)
    headers = _align(TABLE_AT + 40 * count, FILE_ALIGN)
    layout = []  # (name, data, flags, raw pointer, va)
    raw, va = headers, SECTION_ALIGN
    for name, data, flags in sections:
        layout.append((name, data, flags, raw, va))
        raw += _align(len(data), FILE_ALIGN)
        va += _align(max(len(data), 1), SECTION_ALIGN)
    directories = [(0, 0)] * 16
    if imports or delay:
        idata, import_dir, delay_dir = _idata(va, imports, delay)
        layout.append((b".idata", idata, DATA, raw, va))
        directories[1], directories[13] = import_dir, delay_dir
        raw += _align(len(idata), FILE_ALIGN)
        va += _align(len(idata), SECTION_ALIGN)
    out = bytearray(headers)
    out[0:2] = b"MZ"
    struct.pack_into("<I", out, 0x3C, E_LFANEW)
    out[E_LFANEW:COFF_AT] = b"PE\0\0"
    struct.pack_into("<HHIIIHH", out, COFF_AT, machine, count, 0, 0, 0, OPTIONAL_SIZE, 0x2022)
    struct.pack_into("<H", out, OPTIONAL_AT, 0x20B)
    struct.pack_into("<Q", out, OPTIONAL_AT + 24, IMAGE_BASE)
    struct.pack_into("<II", out, OPTIONAL_AT + 32, SECTION_ALIGN, FILE_ALIGN)
    struct.pack_into("<II", out, OPTIONAL_AT + 56, va, headers)
    struct.pack_into("<I", out, OPTIONAL_AT + 108, 16)
    for i, (rva, size) in enumerate(directories):
        struct.pack_into("<II", out, OPTIONAL_AT + 112 + 8 * i, rva, size)
    for i, (name, data, flags, pointer, address) in enumerate(layout):
        struct.pack_into("<8sIIIIIIHHI", out, TABLE_AT + 40 * i, name, len(data), address,
                         _align(len(data), FILE_ALIGN), pointer, 0, 0, 0, 0, flags)  # fmt: skip
    for _, data, _, pointer, _ in layout:
        out += bytes(pointer - len(out))
        out += data + bytes(_align(len(data), FILE_ALIGN) - len(data))
    return bytes(out)


def _idata(
    va: int, imports: tuple[str, ...], delay: tuple[str, ...]
) -> tuple[bytes, tuple[int, int], tuple[int, int]]:
    """The .idata bytes at ``va``: the import descriptors (and their null one), the delay-load
    descriptors (and theirs), then the names."""
    import_size = 20 * (len(imports) + 1)
    delay_size = 32 * (len(delay) + 1) if delay else 0
    names_at = va + import_size + delay_size
    names = b""
    descriptors = b""
    for dll in imports:
        descriptors += struct.pack("<IIIII", 0, 0, 0, names_at + len(names), 0)
        names += dll.encode() + b"\0"
    descriptors += bytes(20)
    delays = b""
    for dll in delay:
        delays += struct.pack("<8I", 1, names_at + len(names), 0, 0, 0, 0, 0, 0)
        names += dll.encode() + b"\0"
    if delay:
        delays += bytes(32)
    import_dir = (va, import_size) if imports else (0, 0)
    delay_dir = (va + import_size, delay_size) if delay else (0, 0)
    return descriptors + delays + names, import_dir, delay_dir


def spec_sections(data: Any) -> list[dict[str, Any]]:
    """Each section header of a PE image, by the specification's offsets."""
    at = struct.unpack_from("<I", data, 0x3C)[0]
    assert bytes(data[at : at + 4]) == b"PE\0\0"
    count = struct.unpack_from("<H", data, at + 4 + 2)[0]
    optional_size = struct.unpack_from("<H", data, at + 4 + 16)[0]
    table = at + 4 + 20 + optional_size
    found = []
    for i in range(count):
        row = table + 40 * i
        found.append(
            {
                "name": bytes(data[row : row + 8]).rstrip(b"\0").decode(),
                "virtual_size": struct.unpack_from("<I", data, row + 8)[0],
                "va": struct.unpack_from("<I", data, row + 12)[0],
                "raw_size": struct.unpack_from("<I", data, row + 16)[0],
                "raw": struct.unpack_from("<I", data, row + 20)[0],
                "flags": struct.unpack_from("<I", data, row + 36)[0],
            }
        )
    return found


def spec_machine(data: Any) -> int:
    at = struct.unpack_from("<I", data, 0x3C)[0]
    return int(struct.unpack_from("<H", data, at + 4)[0])


def spec_imports(data: Any) -> tuple[list[str], list[str]]:
    """(import table DLL names, delay-load table DLL names) of a PE32+ image, by the
    specification's offsets."""
    at = struct.unpack_from("<I", data, 0x3C)[0]
    optional = at + 4 + 20
    assert struct.unpack_from("<H", data, optional)[0] == 0x20B
    sections = spec_sections(data)

    def offset(rva: int) -> int:
        for s in sections:
            if s["va"] <= rva < s["va"] + s["raw_size"]:
                return int(s["raw"] + rva - s["va"])
        raise AssertionError(f"RVA 0x{rva:x} in no section")

    def name(rva: int) -> str:
        start = offset(rva)
        return bytes(data[start : data.index(b"\0", start)]).decode()

    tables: list[list[str]] = []
    for index, size, name_at in ((1, 20, 12), (13, 32, 4)):
        rva = struct.unpack_from("<I", data, optional + 112 + 8 * index)[0]
        names: list[str] = []
        while rva:
            row = offset(rva)
            if not any(data[row : row + size]):
                break
            names.append(name(struct.unpack_from("<I", data, row + name_at)[0]))
            rva += size
        tables.append(names)
    return tables[0], tables[1]
