"""Device code in a host ELF image (a shared library, executable or object): which sections.

``.nv_fatbin`` holds one or more fatbin containers back to back (what cuobjdump lists and the
runtime registers); ``__nv_relfatbin`` holds the relocatable (``-rdc``) fatbins of an object
file. A deep read also searches the data sections (``deepsearch``); code, debug info and the
dynamic linker's tables are never searched. An ELF image of e_machine 190 is a cubin.
"""

from __future__ import annotations

import contextlib
import contextvars
import struct
from typing import Any, Iterator, List, Literal, Optional, Tuple

from . import banner as cuda_banner
from . import dlnames, loadsyms, rtcompilers
from .binreader import NotRecorded, Reader, WorkBoundReached
from .deepsearch import SEARCH_MIN, read_section
from .elf import (
    EM_CUDA,
    SHF_EXECINSTR,
    SHT_NOBITS,
    SHT_NULL,
    SHT_PROGBITS,
    Sections,
    cubin_at,
    dynamic_needs,
    section_table,
)
from .rodata import Search, search_all

# e_machine values of host CPUs (the ELF specification's registry, elf.h)
MACHINES = {3: "x86", 62: "x86-64", 183: "aarch64", 40: "arm", 21: "ppc64", 243: "riscv"}
ET_REL, ET_EXEC, ET_DYN = 1, 2, 3
# Whether the linked images read here have their strings read (read_strings); a caller whose
# output shows only device code says not (device_code_only): its read is then cuobjdump's work.
STRINGS = contextvars.ContextVar("archgap_strings", default=True)

# Sections a deep search never looks into: code, debug info, tables of the dynamic linker.
NOT_DATA_PREFIXES = (
    ".debug",
    ".zdebug",
    ".eh_frame",
    ".gcc_except_table",
    ".note",
    ".comment",
    ".nvFatBinSegment",
    ".got",
    ".init_array",
    ".fini_array",
    ".ctors",
    ".dtors",
    ".interp",
    ".plt",
    ".dynamic",
    ".rela",
    ".rel.",
    ".gnu",
    ".hash",
    ".dynsym",
    ".dynstr",
    ".symtab",
    ".strtab",
    ".shstrtab",
    ".tbss",
)


def _to_read(sections: Sections, deep: bool, limit: int) -> List[int]:
    """The indices of the sections to read, in table order: ``.nv_fatbin`` and
    ``__nv_relfatbin``; with ``deep`` also each data section (PROGBITS, not code) that can hold
    a header (``SEARCH_MIN`` bytes; the thousands of tiny sections of static archives' objects
    cannot) or that runs past the end (reported as truncated)."""
    fatbins = sections.named(b".nv_fatbin") + sections.named(b"__nv_relfatbin")
    if not deep:
        return sorted(fatbins)
    listed = set(fatbins)
    return [
        i
        for i, (kind, flags, offset, size) in enumerate(
            zip(sections.types, sections.flags, sections.offsets, sections.sizes)
        )
        if i in listed
        or (
            kind == SHT_PROGBITS
            and not flags & SHF_EXECINSTR
            and (size >= SEARCH_MIN or (size and offset + size > limit))
        )
    ]


def _read_needs(reader: Reader, fields: Tuple[Any, ...]) -> None:
    """What the dynamic loader must find for the file (its DT_NEEDED names and search paths),
    where the image is 64-bit little-endian (every CUDA host platform); else not read. Quiet:
    the device code is this reader's to report on, and ``needed`` None says it was not read."""
    if reader.buf[4:6] != b"\x02\x01":
        return
    try:
        reader.needed, reader.runpath = dynamic_needs(reader.buf, reader.size, fields)
    except (ValueError, struct.error, NotRecorded):  # not read (a streamed member's tables
        reader.needed, reader.runpath = None, ()  # not kept, a damaged file): nothing claimed


def _e_type(buf: Any) -> int:
    """e_type of the little-endian ELF header at the start of ``buf``."""
    return int(struct.unpack("<H", bytes(buf[16:18]))[0])


def _linked(buf: Any, base: int, limit: int) -> bool:
    """Whether [base, limit) starts a linked 64-bit little-endian image (a library, a program)."""
    linked = base == 0 and limit >= 64 and bytes(buf[4:6]) == b"\x02\x01"
    return linked and _e_type(buf) in (ET_EXEC, ET_DYN)


def _read_header(reader: Reader, fields: Tuple[Any, ...], base: int) -> bool:
    """The machine of the image's header and, for a linked library at the start of the file,
    what it needs (``_read_needs``); whether it is one."""
    if reader.machine is None:
        reader.machine = MACHINES.get(fields[2], "e_machine %d" % fields[2])
    library = base == 0 and fields[1] in (ET_EXEC, ET_DYN)
    if library:
        _read_needs(reader, fields)
    return library


def read_elf(
    reader: Reader, base: int, limit: int, member: Optional[str]
) -> Literal["elf", "cubin"]:
    """Device code in one ELF image in [base, limit). Returns "elf" or "cubin"."""
    buf = reader.buf
    where = "%s: " % member if member else ""
    if base + 20 <= limit and struct.unpack("<H", buf[base + 18 : base + 20])[0] == EM_CUDA:
        cubin_at(reader, base, limit, "", True, member, loose=True)
        return "cubin"
    # a linked image's whole table (a few dozen sections): what it may dlopen is read too
    linked = _linked(buf, base, limit)
    only_fatbin = not reader.deep and not linked
    fields, sections = section_table(reader, base, limit, where, only_fatbin=only_fatbin)
    library = fields is not None and _read_header(reader, fields, base)
    if sections is None:
        return "elf"
    strings = library and STRINGS.get()
    try:
        _read_sections(reader, sections, limit, member, fields[1] == ET_REL, where)
    except (WorkBoundReached, NotRecorded):  # what was read of the library still counts
        if strings:
            read_strings(reader, sections, banner=False)
        raise
    if strings:  # the banner, where its cubins' notes (read above) named no release
        read_strings(reader, sections, banner=linked and not reader.toolkits)
    return "elf"


def _read_sections(
    reader: Reader, sections: Sections, limit: int, member: Optional[str], is_object: bool,
    where: str,
) -> None:  # fmt: skip
    """The device code of the sections ``_to_read`` names."""
    for i in _to_read(sections, reader.deep, limit):
        if sections.types[i] in (SHT_NULL, SHT_NOBITS) or not sections.sizes[i]:
            continue
        name = sections.name(i)
        offset = sections.offsets[i]
        end = offset + sections.sizes[i]
        fatbin_section = name in (".nv_fatbin", "__nv_relfatbin")
        if not fatbin_section and name.startswith(NOT_DATA_PREFIXES):
            continue
        read_section(reader, name, offset, end, limit, member, is_object, where)


def read_strings(reader: Reader, sections: Sections, banner: bool) -> None:
    """A linked library's facts from its read-only data, in one pass over it (rodata.search_all):
    the names it may dlopen and the CUDA functions it may load device code with (where its
    dynamic section was read), its run-time compilers, and with ``banner`` the CUDA release a
    toolkit banner names."""
    names = dlnames.names_search(reader, sections) if reader.needed is not None else None
    triple = rtcompilers.triple_search(sections)
    release = cuda_banner.banner_search(sections) if banner else None
    loaders = loadsyms.names_search(sections) if reader.needed is not None else None
    search_all(reader, [s for s in (names, triple, release, loaders) if isinstance(s, Search)])
    if reader.needed is not None:
        reader.dlopens = dlnames.names_found(reader, names) if isinstance(names, Search) else names
        reader.loader_imports = loadsyms.loader_imports(reader.buf, sections)
        reader.loader_names = loadsyms.names_found(reader, loaders)
    reader.compilers = rtcompilers.compilers_found(reader, triple)
    if release is not None:
        reader.cuda_release = cuda_banner.release_found(reader, release)


@contextlib.contextmanager
def device_code_only() -> Iterator[None]:
    """Within the block, the linked images read here leave their strings unread (``dlopens``,
    ``compilers`` and ``cuda_release`` stay None: not read): for a caller whose output shows
    only device code (the table of ``archgap kernels``)."""
    token = STRINGS.set(False)
    try:
        yield
    finally:
        STRINGS.reset(token)
