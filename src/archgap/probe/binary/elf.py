"""ELF images: section tables, and cubins (ELF images of e_machine 190, the CUDA machine).

A section table is read into columns (``Sections``) in one pass; a cubin's architecture comes
from ``e_flags`` and, for family ('f') builds, from the ptxas command line it keeps in
``.note.nv.tkinfo`` (docs/reference/fatbin-format.md), which also names the toolkit that built it
(``cubin_toolkit``). Only headers, tables and that note are read.
"""

from __future__ import annotations

import re
import struct
import sys
from typing import Any, List, Optional, Tuple

from .binreader import Reader
from .facts import Variant, as_variant

ELF_MAGIC = b"\x7fELF"
# What a deep search looks for to find a bare cubin: the ELF ident of a 64-bit little-endian
# ELF version 1 image, the only kind cubin_at accepts (7 bytes: searched ~25 % faster than 4).
CUBIN_IDENT = ELF_MAGIC + b"\x02\x01\x01"

EM_CUDA = 190
ET_REL, ET_EXEC = 1, 2  # ELF types: a relocatable object (nvcc -rdc -c), a linked image
SHT_NULL = 0
SHT_PROGBITS = 1
SHT_STRTAB = 3
SHT_NOBITS = 8
SHF_EXECINSTR = 0x4

ELF64_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
ELF32_HEADER = struct.Struct("<16sHHIIIIIHHHHHH")
ELF64_SECTION = struct.Struct("<IIQQQQIIQQ")
ELF32_SECTION = struct.Struct("<IIIIIIIIII")
MAX_SECTIONS = 1 << 20  # section headers parsed per table (64 MiB of table) at most
TKINFO_ARCH = re.compile(rb"-arch[ =]+sm_(\d+)([af]?)")
# The toolkit a cubin's .note.nv.tkinfo names (ptxas and nvlink write their banner there:
# "Cuda compilation tools, release 13.0, V13.0.88"): the CUDA release that built it.
TKINFO_RELEASE = re.compile(rb"Cuda compilation tools, release (\d{1,3})\.(\d{1,3})")
TKINFO_READ_MAX = 4096  # bytes of one note searched for the banner at most
# A cubin whose toolkit note is looked for has at most this many sections and bytes of section
# names (a kernel's cubin: dozens of sections, a few KiB of names); a larger one is not read.
TKINFO_MAX_SECTIONS = 1 << 16
TKINFO_MAX_NAMES = 1 << 20


class Sections:
    """An ELF section table as columns; offsets are absolute in the file."""

    def __init__(
        self,
        strtab: bytes,
        base: int,
        names: List[int],
        types: List[int],
        flags: List[int],
        offsets: List[int],
        sizes: List[int],
    ) -> None:
        self.strtab = strtab
        self.names = names
        self.types = types
        self.flags = flags
        self.offsets = [base + offset for offset in offsets]
        self.sizes = sizes

    def name(self, index: int) -> str:
        at = self.names[index]
        if at >= len(self.strtab):
            return ""
        stop = self.strtab.find(b"\0", at, at + 256)
        return self.strtab[at : stop if stop >= 0 else at + 256].decode("utf-8", "replace")

    def any_starting(self, prefix: bytes) -> bool:
        """Whether a section's name (as ``name`` reads it) starts with ``prefix``. The name table
        is searched, not each name read: a cubin has dozens of sections (flashinfer-cubin's
        15,970 have 597,362), and only a few names matter."""
        strtab, names = self.strtab, set(self.names)
        at = strtab.find(prefix)
        while at >= 0:
            if at in names:
                return True
            at = strtab.find(prefix, at + 1)
        return False

    def named(self, wanted: bytes) -> List[int]:
        """Indices of the sections called ``wanted`` as ``name`` reads names: ended by a NUL or
        by the end of the table (names may share a string-table tail)."""
        strtab, spots = self.strtab, set()
        at = strtab.find(wanted)
        while at >= 0:
            stop = at + len(wanted)
            if stop == len(strtab) or strtab[stop] == 0:
                spots.add(at)
            at = strtab.find(wanted, at + 1)
        return [i for i, name in enumerate(self.names) if name in spots] if spots else []


def _elf_header(reader: Reader, base: int, limit: int, where: str) -> Any:
    """(fields, little-endian, wide, section entry struct) of the ELF header at ``base``; None
    (reported) when it is truncated or of an unknown class or byte order."""
    buf = reader.buf
    if base + 52 > limit:
        reader.fail("%struncated ELF header" % where)
        return None
    elf_class, data = buf[base + 4], buf[base + 5]
    if elf_class not in (1, 2) or data not in (1, 2):
        reader.fail("%sunknown ELF class or byte order" % where)
        return None
    order = "<" if data == 1 else ">"
    wide = elf_class == 2
    header = struct.Struct(order + (ELF64_HEADER if wide else ELF32_HEADER).format[1:])
    entry = struct.Struct(order + (ELF64_SECTION if wide else ELF32_SECTION).format[1:])
    if base + header.size > limit:
        reader.fail("%struncated ELF header" % where)
        return None
    return header.unpack(buf[base : base + header.size]), order == "<", wide, entry


def _section_count(
    reader: Reader, table: int, limit: int, where: str, fields: Tuple[Any, ...], entry: Any
) -> Tuple[int, int]:
    """(section count, names index) of the table at ``table``, the count cut to the headers
    present and to MAX_SECTIONS (each cut reported)."""
    buf, shentsize, shnum, shstrndx = reader.buf, fields[11], fields[12], fields[13]
    if shnum == 0 or shstrndx == 0xFFFF:  # extended numbering: real values in section 0
        first = entry.unpack(buf[table : table + entry.size])
        shnum = shnum or first[5]
        if shstrndx == 0xFFFF:
            shstrndx = first[6]
    available = (limit - table) // shentsize
    if shnum > available:
        reader.fail("%struncated: %d of %d section headers present" % (where, available, shnum))
        shnum = available
    if shnum > MAX_SECTIONS:
        reader.fail("%s%d section headers: the first %d are read" % (where, shnum, MAX_SECTIONS))
        shnum = MAX_SECTIONS
    return shnum, shstrndx


def _section_names(buf: Any, base: int, limit: int, names_at: int, entry: Any) -> bytes:
    """The section-name string table whose header is at ``names_at`` (64 MiB at most)."""
    names_header = entry.unpack(buf[names_at : names_at + entry.size])
    names_start = base + names_header[4]
    names_end = min(names_start + names_header[5], limit, names_start + (64 << 20))
    return bytes(buf[names_start:names_end]) if names_start < names_end else b""


def _section_columns(raw: bytes, native: bool, entry: Any, shnum: int) -> Tuple[List[int], ...]:
    """(names, types, flags, offsets, sizes) of the section headers in ``raw``."""
    if native:
        # Columns straight out of the table: one C-level pass instead of a tuple per section.
        words = memoryview(raw).cast("I")
        quads = memoryview(raw).cast("Q")
        return (words[0::16].tolist(), words[1::16].tolist(), quads[1::8].tolist(),
                quads[3::8].tolist(), quads[4::8].tolist())  # fmt: skip
    rows = [entry.unpack_from(raw, i * entry.size) for i in range(shnum)]
    return ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
            [r[4] for r in rows], [r[5] for r in rows])  # fmt: skip


def section_table(reader: Reader, base: int, limit: int, where: str, only_fatbin: bool) -> Any:
    """The ELF header fields and the section table of the image in [base, limit).

    Returns (fields, sections); sections is None when there are none or, with
    ``only_fatbin``, when no section name mentions a fatbin (the common case for objects in
    static archives with thousands of sections: only the name table is read then)."""
    header = _elf_header(reader, base, limit, where)
    if header is None:
        return None, None
    fields, little, wide, entry = header
    shoff, shentsize = fields[6], fields[11]
    if shoff == 0:
        return fields, None
    if shentsize != entry.size:
        reader.fail("%sunexpected section header size %d" % (where, shentsize))
        return fields, None
    table = base + shoff
    if table + shentsize > limit:
        reader.fail("%struncated: the section headers are past the end" % where)
        return fields, None
    shnum, shstrndx = _section_count(reader, table, limit, where, fields, entry)
    strtab = b""
    if shstrndx < shnum:
        strtab = _section_names(reader.buf, base, limit, table + shstrndx * shentsize, entry)
    if only_fatbin and b"fatbin\0" not in strtab:
        return fields, None
    reader.spend(shnum)
    raw = bytes(reader.buf[table : table + shnum * shentsize])
    native = wide and little and sys.byteorder == "little"
    return fields, Sections(strtab, base, *_section_columns(raw, native, entry, shnum))


def _cubin_table(buf: Any, base: int, end: int) -> Optional[Tuple[int, int, int, int]]:
    """(section table offset, entry count, entry size, names index) of a well-formed little-endian
    64-bit CUDA cubin in ``buf[base:end]`` whose table lies inside it; None otherwise."""
    if end - base < ELF64_HEADER.size or buf[base : base + 4] != ELF_MAGIC:
        return None
    fields = ELF64_HEADER.unpack(buf[base : base + ELF64_HEADER.size])
    ident, machine = fields[0], fields[2]
    shoff, shentsize, shnum, shstrndx = fields[6], fields[11], fields[12], fields[13]
    if ident[4] != 2 or ident[5] != 1 or machine != EM_CUDA:
        return None
    table = base + shoff
    if shentsize != ELF64_SECTION.size or not shstrndx < shnum or table + shnum * 64 > end:
        return None
    return table, shnum, shentsize, shstrndx


def cubin_has_text(buf: Any, base: int, end: int) -> Optional[bool]:
    """Whether the cubin in ``buf[base:end]`` has a ``.text`` section (a kernel); None if unsure.

    Quiet: a payload that is not a well-formed cubin is not this check's to report."""
    found = _cubin_table(buf, base, end)
    if found is None:
        return None
    table, shnum, shentsize, shstrndx = found
    names_at = table + shstrndx * shentsize
    names = ELF64_SECTION.unpack(buf[names_at : names_at + shentsize])
    start, stop = base + names[4], base + names[4] + names[5]
    if stop > end:
        return None
    strtab = bytes(buf[start:stop])
    offsets = memoryview(bytes(buf[table : table + shnum * shentsize])).cast("I")[0::16]
    return any(strtab.startswith(b".text", offset) for offset in offsets)


def cubin_toolkit(buf: Any, base: int, end: int) -> Optional[str]:
    """The CUDA release ("13.0") that the ``.note.nv.tkinfo`` of the cubin in ``buf[base:end]``
    names; None when it has no such note or is not a well-formed cubin (quiet, like
    ``cubin_has_text``: the entry is reported by its header)."""
    found = _cubin_table(buf, base, end)
    if found is None:
        return None
    table, shnum, shentsize, shstrndx = found
    if shnum > TKINFO_MAX_SECTIONS:
        return None  # no cubin ptxas writes has so many: not read (bounded copies)
    names_at = table + shstrndx * shentsize
    names = ELF64_SECTION.unpack(buf[names_at : names_at + shentsize])
    start, stop = base + names[4], base + names[4] + names[5]
    if stop > end or stop - start > TKINFO_MAX_NAMES:
        return None
    strtab = bytes(buf[start:stop])
    raw = bytes(buf[table : table + shnum * shentsize])
    words = memoryview(raw).cast("I")
    quads = memoryview(raw).cast("Q")
    for name, offset, size in zip(words[0::16], quads[3::8], quads[4::8]):
        if not strtab.startswith(b".note.nv.tkinfo\0", name) or base + offset + size > end:
            continue
        note = bytes(buf[base + offset : base + offset + min(size, TKINFO_READ_MAX)])
        match = TKINFO_RELEASE.search(note)
        if match:
            return "%d.%d" % (int(match.group(1)), int(match.group(2)))
    return None


# An ELF note (the ELF specification's note format: namesz, descsz, type, then the name and
# the descriptor, each 4-byte aligned) owned by "NVIDIA Corp", as ptxas writes .note.nv.tkinfo.
NVIDIA_NOTE = re.compile(rb"\x0c\x00\x00\x00(.{4})(.{4})NVIDIA Corp\x00", re.DOTALL)


def note_toolkit(data: bytes) -> Optional[str]:
    """The CUDA release the first NVIDIA note in ``data`` (the first bytes of a cubin, before
    its section table) names with the toolkit's banner: the tkinfo note by its own format,
    where the section table that names it is not at hand (a compressed cubin unpacked only as
    far as its notes); None when no such note is in ``data``."""
    for match in NVIDIA_NOTE.finditer(data):
        if match.start() % 4:
            continue
        size = struct.unpack("<I", match.group(1))[0]
        desc = data[match.end() : match.end() + min(size, TKINFO_READ_MAX)]
        found = TKINFO_RELEASE.search(desc)
        if found:
            return "%d.%d" % (int(found.group(1)), int(found.group(2)))
    return None


def plausible_cubin(reader: Reader, base: int, fields: Tuple[Any, ...]) -> bool:
    """Cheap checks of a cubin found by searching, before its section table is parsed: its
    name table is a string table, and no other cubin owns its section table. Each candidate
    costs a constant, so a data section of fake headers that share one huge table stays
    linear."""
    reader.spend(1)
    shoff, shnum, shstrndx = fields[6], fields[12], fields[13]
    table = base + shoff
    if table in reader.seen_tables or not 0 < shstrndx < shnum:
        return False
    at = table + shstrndx * ELF64_SECTION.size + 4
    names_type = struct.unpack("<I", reader.buf[at : at + 4])
    if names_type[0] != SHT_STRTAB:
        return False
    reader.seen_tables.add(table)
    return True


def _cubin_fields(reader: Reader, base: int, limit: int, loose: bool) -> Optional[Tuple[Any, ...]]:
    """The ELF header fields of a cubin at ``base``; None when it is not one (reported when
    ``loose``: a file named as a cubin, not one found by searching)."""
    if base + ELF64_HEADER.size > limit:
        if loose:
            reader.fail("truncated cubin header")
        return None
    fields = ELF64_HEADER.unpack(reader.buf[base : base + ELF64_HEADER.size])
    ident, machine = fields[0], fields[2]
    shoff, ehsize, shentsize, shnum = fields[6], fields[8], fields[11], fields[12]
    valid = (
        ident[4] == 2
        and ident[5] == 1
        and machine == EM_CUDA
        and ehsize == ELF64_HEADER.size
        and (shoff == 0 or shentsize == ELF64_SECTION.size)
    )
    if not valid or (not loose and (shnum == 0 or base + shoff + shnum * shentsize > limit)):
        if loose:
            reader.fail("not a 64-bit little-endian cubin")
        return None
    if not loose and not plausible_cubin(reader, base, fields):
        return None
    return fields


def _cubin_sections(
    reader: Reader, base: int, limit: int, fields: Tuple[Any, ...], loose: bool
) -> Tuple[int, Optional[bool], bool, List[Tuple[int, int]]]:
    """(end, has kernels, has debug info, (offset, size) of each .note.nv.tkinfo) of a cubin:
    it ends after its last section with contents or its last table."""
    shoff, shentsize, shnum = fields[6], fields[11], fields[12]
    phoff, phentsize, phnum = fields[5], fields[9], fields[10]
    end = max(base + shoff + shnum * shentsize, base + phoff + phnum * phentsize)
    sections = section_table(reader, base, limit, "", only_fatbin=False)[1] if shoff else None
    if sections is None or not sections.names:
        return end, None, False, []
    if not loose:
        kept = zip(sections.types, sections.offsets, sections.sizes)
        end = max([end] + [offset + size for sh_type, offset, size in kept
                           if sh_type != SHT_NOBITS])  # fmt: skip
    notes = [(sections.offsets[i], sections.sizes[i])
             for i in sections.named(b".note.nv.tkinfo")]  # fmt: skip
    return end, sections.any_starting(b".text"), bool(sections.named(b".debug_info")), notes


def _cubin_arch(ident: bytes, e_flags: int) -> Tuple[int, Variant]:
    """The SM and the 'a' variant that a cubin's ``e_flags`` say."""
    # The SM sits in bits 8-15 of e_flags from ELF ABI version 8 (OSABI 0x41) on, with 0x8
    # (EF_CUDA_ACCELERATORS in LLVM's BinaryFormat/ELF.h) for an arch-specific ('a') build:
    # nvasm sets it where ptxas records the target in .note.nv.tkinfo instead (flashinfer-cubin's
    # sm_100a kernels; cuobjdump lists them as sm_100a). Older cubins keep the SM in bits 0-7,
    # with 0x800 for 'a'. 'a' targets exist only from sm_90 on: below it the bit means
    # something else (CUDA 9.0's sm_60 cubins set 0x800; cuobjdump lists them as sm_60).
    new_layout = ident[7] == 0x41 or ident[8] >= 8
    arch = (e_flags >> 8) & 0xFF if new_layout else e_flags & 0xFF
    accelerated = e_flags & (0x8 if new_layout else 0x800)
    return arch, "a" if accelerated and arch >= 90 else ""


def _read_notes(
    reader: Reader, notes: List[Tuple[int, int]], limit: int, arch: int, variant: Variant
) -> Variant:
    """The variant the cubin's toolkit notes record for ``arch`` (``variant`` if none does);
    the toolkit each names is added to ``reader.toolkits``."""
    for offset, size in notes:
        if offset + size <= limit:
            # ptxas records its command line here: the only place a cubin keeps 'f'.
            note = reader.buf[offset : offset + min(size, 65536)]
            match = TKINFO_ARCH.search(note)
            if match and int(match.group(1)) == arch:
                variant = as_variant(match.group(2).decode())  # the pattern takes [af]?
            release = TKINFO_RELEASE.search(note)
            if release:
                reader.toolkits.add("%d.%d" % (int(release.group(1)), int(release.group(2))))
    return variant


def cubin_at(
    reader: Reader,
    base: int,
    limit: int,
    section: str,
    listed: bool,
    member: Optional[str],
    loose: bool = False,
) -> int:
    """One bare cubin at ``base``; returns where it ends (``base`` when it is not a cubin)."""
    if base in reader.seen_cubins:  # found before, through another section header
        return reader.seen_cubins[base]
    fields = _cubin_fields(reader, base, limit, loose)
    if fields is None:
        return base
    end, kernels, debug, notes = _cubin_sections(reader, base, limit, fields, loose)
    end = limit if loose else end  # a loose cubin is the whole file
    if end > limit:
        return base
    arch, variant = _cubin_arch(fields[0], fields[7])
    variant = _read_notes(reader, notes, limit, arch, variant)
    size = end - base
    # A bare cubin a deep search found: relocatable (ET_REL, a device-link input) or linked.
    e_type = fields[1]
    relocatable = e_type == ET_REL if not listed and e_type in (ET_REL, ET_EXEC) else None
    reader.found("sass", arch, variant, None, "none", size, size, section, base, debug, listed,
                 member, 1, kernels, relocatable)  # fmt: skip
    reader.seen_cubins[base] = end
    return end


PT_LOAD = 1
PT_DYNAMIC = 2
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_RPATH, DT_RUNPATH = 0, 1, 5, 10, 15, 29
MAX_DYNAMIC = 4096  # dynamic entries read at most (a library has ~40)
MAX_NEED_NAME = 4096  # bytes of one needed name or search path read at most
ELF64_PROGRAM = struct.Struct("<IIQQQQQQ")
ELF64_DYN = struct.Struct("<qQ")


def _segments(
    buf: Any, size: int, fields: Tuple[Any, ...]
) -> Tuple[List[Tuple[int, int, int]], Optional[Tuple[int, int]]]:
    """((vaddr, offset, filesz) of each PT_LOAD, (offset, filesz) of PT_DYNAMIC or None)."""
    phoff, phentsize, phnum = fields[5], fields[9], fields[10]
    if phentsize != ELF64_PROGRAM.size or phoff + phnum * phentsize > size:
        raise ValueError("program headers past the end")
    table = bytes(buf[phoff : phoff + phnum * phentsize])
    loads: List[Tuple[int, int, int]] = []
    dynamic: Optional[Tuple[int, int]] = None
    for i in range(phnum):
        kind, _, offset, vaddr, _, filesz, _, _ = ELF64_PROGRAM.unpack_from(table, i * phentsize)
        if kind == PT_LOAD:
            loads.append((vaddr, offset, filesz))
        elif kind == PT_DYNAMIC:
            dynamic = (offset, filesz)
    return loads, dynamic


def _dynamic_tags(buf: Any, size: int, dynamic: Tuple[int, int]) -> List[Tuple[int, int]]:
    """(tag, value) of each dynamic entry before DT_NULL (MAX_DYNAMIC at most)."""
    offset, length = dynamic[0], min(dynamic[1], MAX_DYNAMIC * ELF64_DYN.size)
    if offset + length > size:
        raise ValueError("dynamic section past the end")
    raw = bytes(buf[offset : offset + length])
    tags: List[Tuple[int, int]] = []
    for at in range(0, len(raw) - ELF64_DYN.size + 1, ELF64_DYN.size):
        tag, value = ELF64_DYN.unpack_from(raw, at)
        if tag == DT_NULL:
            break
        tags.append((tag, value))
    return tags


def _file_offset(loads: List[Tuple[int, int, int]], address: Optional[int]) -> Optional[int]:
    """The file offset of ``address``: that of the PT_LOAD segment holding it."""
    if address is None:
        return None
    return next((o + address - v for v, o, n in loads if v <= address < v + n), None)


def dynamic_needs(buf: Any, size: int, fields: Tuple[Any, ...]) -> Tuple[Tuple[str, ...], ...]:
    """(DT_NEEDED names, RUNPATH or else RPATH directories) of the 64-bit little-endian host
    ELF image at the start of ``buf`` whose header is ``fields``: what the dynamic loader must
    find for it (ld.so(8)); ((), ()) for an image without a dynamic section. Raises what slicing
    raises (a streamed member's ``NotRecorded``) and ValueError for tables past the end."""
    loads, dynamic = _segments(buf, size, fields)
    if dynamic is None:
        return (), ()
    tags = _dynamic_tags(buf, size, dynamic)
    strsz = next((v for t, v in tags if t == DT_STRSZ), 0)
    # DT_STRTAB is an address: the file offset is that of the PT_LOAD segment holding it
    start = _file_offset(loads, next((v for t, v in tags if t == DT_STRTAB), None))
    if start is None or start + strsz > size:
        raise ValueError("dynamic string table not in the file")

    def texts(kind: int) -> List[str]:
        # each string read on its own: a streamed member keeps these, not the whole table
        found = []
        for at in (v for t, v in tags if t == kind and v < strsz):
            piece = bytes(buf[start + at : start + min(strsz, at + MAX_NEED_NAME)])
            stop = piece.find(b"\0")
            found.append(piece[: stop if stop >= 0 else len(piece)].decode("utf-8", "replace"))
        return found

    # RPATH is ignored when RUNPATH is present (ld.so(8))
    paths = texts(DT_RUNPATH) or texts(DT_RPATH)
    return tuple(texts(DT_NEEDED)), tuple(d for p in paths for d in p.split(":") if d)
