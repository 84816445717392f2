"""Device code inside binaries: ELF section headers and fatbin headers, read through mmap.

What is read (formats measured against cuobjdump 13.5: shared/reference/fatbin_format.md):

- ELF shared libraries, executables and objects: the ``.nv_fatbin`` section holds one or more
  fatbin containers back to back; ``__nv_relfatbin`` holds the relocatable (``-rdc``) fatbins of an
  object file. Static archives (``ar``) are read member by member.
- Loose ``.cubin`` files (an ELF image with e_machine 190) and ``.fatbin`` files (containers).
- ``deep=True`` also searches the data sections (``.cask_resource``, ``.ldata``, ``.rodata``,
  ``.data`` ...) for containers and bare cubins that libraries load themselves and cuobjdump never
  lists. Every candidate header is validated before it counts, so a stray magic number is no hit.

Only headers are touched (the ELF header, the section header table, 16 bytes per container and
64 per entry); nothing is decompressed. Nothing here raises to the caller: an unreadable,
truncated or corrupt file becomes a ``BinaryFacts`` with ``error`` set, keeping what was found
before the damage.

Which files a directory walk reads (``discover``, under ``walk_binaries``): regular files named
``*.so``, ``*.so.N``, ``*.a``, ``*.o``, ``*.cubin`` or ``*.fatbin``, and executable files whose
first bytes are the ELF magic. Names with a known text/data extension (``.py``, ``.h``,
``.json`` ...) are never looked at further, which keeps a walk over a multi-gigabyte
site-packages at one ``readdir`` per directory: only symlinks and files with other names are
``stat``'ed (for the executable bit), and only executables are opened to check their magic.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import pickle
import re
import select
import stat
import struct
import sys
import threading
from dataclasses import replace
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple, Union

from .facts import BinaryFacts, KernelEntry
from .forked import in_two_processes
from .summary import binary_json
from .system import System

CONTAINER_MAGIC = b"\x50\xed\x55\xba"  # 0xBA55ED50 little-endian
ELF_MAGIC = b"\x7fELF"
# What a deep search looks for to find a bare cubin: the ELF ident of a 64-bit little-endian
# ELF version 1 image, the only kind cubin_at accepts (7 bytes: searched ~25 % faster than 4).
CUBIN_IDENT = ELF_MAGIC + b"\x02\x01\x01"
READAHEAD_MIN = 1 << 20  # searched ranges at least this large get the kernel's read-ahead back
# A deep search looks at this many bytes at a time, and hands the pages it has left behind back
# (MADV_DONTNEED: they stay in the page cache), so the memory of a scan does not grow with the
# largest data section (cuBLASLt's are 100 MB): 32 MiB ~ the time of 10 ms of searching.
SEARCH_WINDOW = 32 << 20
AR_MAGIC = b"!<arch>\n"
THIN_AR_MAGIC = b"!<thin>\n"

EM_CUDA = 190
# e_machine values of host CPUs (the ELF specification's registry, elf.h)
MACHINES = {3: "x86", 62: "x86-64", 183: "aarch64", 40: "arm", 21: "ppc64", 243: "riscv"}
KERNEL_CHECK_MAX = 64 << 10  # uncompressed cubins up to this size are checked for a .text section
ET_REL = 1
SHT_NULL = 0
SHT_PROGBITS = 1
SHT_STRTAB = 3
SHT_NOBITS = 8
SHF_EXECINSTR = 0x4

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

ELF64_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
ELF32_HEADER = struct.Struct("<16sHHIIIIIHHHHHH")
ELF64_SECTION = struct.Struct("<IIQQQQIIQQ")
ELF32_SECTION = struct.Struct("<IIIIIIIIII")

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
MAX_ERRORS = 4  # messages kept per file; the count of the rest is reported
# Work allowed per file, in units of one section header parsed, one entry or cubin header
# checked, or one KiB searched: far above any real library (cuBLASLt --deep: ~0.5 M), far below
# what a hostile file can ask for. A file that reaches it is "unknown" with the reason.
WORK_BUDGET = 16_000_000
MAX_SECTIONS = 1 << 20  # section headers parsed per table (64 MiB of table) at most
MAX_LONG_NAMES = 16 << 20  # bytes kept of an archive's long-name table
# Entry sizes that cannot be: an LZ4 block expands at most ~255x and a Zstandard block
# (128 KiB from a few bytes) ~2^15x; nothing unpacks to more than this many bytes.
MAX_EXPANSION = 1 << 16
MAX_UNPACKED = 1 << 40
ZERO_CHUNK = 1 << 20  # bytes compared at a time when checking that a range is zero
TKINFO_ARCH = re.compile(rb"-arch[ =]+sm_(\d+)([af]?)")

# Files without an extension that are never binaries (wheel metadata, licences).
NOT_BINARY_NAMES = frozenset(
    ("RECORD", "METADATA", "WHEEL", "INSTALLER", "REQUESTED", "LICENSE", "NOTICE", "COPYING",
     "AUTHORS", "README", "Makefile", "BUILD", "CMakeLists")
)  # fmt: skip
# File names that are read without looking at their permission bits.
CANDIDATE_NAME = re.compile(r"(\.so(\.\d+)*|\.a|\.o|\.cubin|\.fatbin)$")
# Extensions that are never device code: such files are not even stat'ed during a walk.
TEXT_EXTENSIONS = frozenset(
    (
        ".py", ".pyc", ".pyi", ".pyx", ".pxd", ".h", ".hpp", ".hh", ".cuh", ".cu", ".c", ".cc",
        ".cpp", ".cxx", ".inc", ".inl", ".txt", ".md", ".rst", ".json", ".yaml", ".yml", ".toml",
        ".cfg", ".ini", ".typed", ".pth", ".html", ".js", ".css", ".csv", ".svg", ".png", ".jpg",
        ".cmake", ".in", ".sh", ".bat", ".pem", ".whl", ".zip", ".gz", ".xml", ".proto", ".def",
        ".jinja", ".j2", ".ipynb", ".pkl", ".npz", ".npy", ".pt", ".onnx", ".mlir", ".ll", ".ptx",
    )
)  # fmt: skip


class _Sections:
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

    def named(self, wanted: bytes) -> List[int]:
        """Indices of the sections called ``wanted`` (names may share a string-table tail)."""
        spots = set()
        at = self.strtab.find(wanted + b"\0")
        while at >= 0:
            spots.add(at)
            at = self.strtab.find(wanted + b"\0", at + 1)
        return [i for i, name in enumerate(self.names) if name in spots] if spots else []


class WorkBoundReached(Exception):
    """A file asked for more work than ``WORK_BUDGET``: it is reported as "unknown"."""


class _Reader:
    """One file's bytes (an mmap) and what was found in them so far."""

    def __init__(self, buf: Any, size: int, deep: bool, fd: int = -1) -> None:
        self.buf = buf
        self.size = size
        self.deep = deep
        self.fd = fd  # for SEEK_DATA: holes of a sparse file are zero and never touched
        self.extent = (0, 0)  # the stretch of file data data_at found last
        self.entries: List[KernelEntry] = []
        self.errors: List[str] = []
        self.error_count = 0
        self.machine: Optional[str] = None  # e_machine of the first host ELF image read
        self.work = 0
        # Offsets already read: a region is read once, however many headers point at it.
        self.seen_containers: Dict[int, int] = {}  # container offset -> where its walk ended
        self.seen_entries: Set[int] = set()
        self.seen_cubins: Dict[int, int] = {}  # cubin offset -> its end
        self.seen_tables: Set[int] = set()  # section tables that belong to a found cubin
        self.seen_regions: Set[Tuple[int, int]] = set()

    def spend(self, units: int) -> None:
        self.work += units
        if self.work > WORK_BUDGET:
            raise WorkBoundReached(
                "work bound reached (%d units: headers, entries and KiB searched)" % WORK_BUDGET
            )

    def data_at(self, pos: int, end: int) -> Tuple[int, int]:
        """[start, stop) of the first stretch of file data in [pos, end), skipping holes of a
        sparse file; (end, end) when only holes are left."""
        known_start, known_stop = self.extent
        if known_start <= pos < known_stop:  # no system call: most files are one stretch
            return pos, min(known_stop, end)
        if self.fd < 0 or not hasattr(os, "SEEK_DATA"):
            return pos, end
        try:
            start = os.lseek(self.fd, pos, os.SEEK_DATA)
            stop = os.lseek(self.fd, start, os.SEEK_HOLE)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # nothing but a hole up to the end of the file
                return end, end
            return pos, end
        self.extent = (start, stop)
        return min(start, end), min(stop, end)

    def fail(self, message: str) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(message)

    def error_text(self) -> Optional[str]:
        if not self.error_count:
            return None
        more = self.error_count - len(self.errors)
        return "; ".join(self.errors) + ("; %d more" % more if more > 0 else "")

    def is_zero(self, start: int, end: int) -> bool:
        """Whether [start, end) holds only zero bytes; holes are not read, and no more than
        ``ZERO_CHUNK`` bytes are copied at a time."""
        pos = start
        while pos < end:
            pos, stop = self.data_at(pos, end)
            while pos < stop:
                chunk = min(stop, pos + ZERO_CHUNK)
                self.spend((chunk - pos) >> 10)
                if self.buf[pos:chunk].strip(b"\0"):
                    return False
                pos = chunk
        return True

    # -- fatbin containers and entries ----------------------------------------------------------

    def walk_containers(
        self, start: int, end: int, section: str, listed: bool, member: Optional[str]
    ) -> None:
        """Containers laid back to back in [start, end) (``.nv_fatbin``, a ``.fatbin`` file)."""
        label = section or "fatbin"
        pos = start
        released = start - start % mmap.PAGESIZE
        while pos + CONTAINER_HEADER.size <= end:
            if pos - released >= SEARCH_WINDOW:  # each header read maps ~64 KiB around it
                released = self.release(released, pos)
            if self.buf[pos : pos + 4] != CONTAINER_MAGIC:
                found = self.buf.find(CONTAINER_MAGIC, pos, end)
                stop = end if found < 0 else found
                if not self.is_zero(pos, stop):
                    self.fail("%s: unrecognised bytes at 0x%x" % (label, pos))
                if found < 0:
                    return
                pos = found
                continue
            _, version, header_size, fat_size = CONTAINER_HEADER.unpack_from(self.buf, pos)
            if version != 1 or header_size != CONTAINER_HEADER.size:
                self.fail(
                    "%s: invalid container header at 0x%x (version %d, header size %d)"
                    % (label, pos, version, header_size)
                )
                pos += 4
                continue
            body = pos + header_size
            container_end = body + fat_size
            if container_end > end:
                self.fail(
                    "%s: container at 0x%x runs 0x%x bytes past the end"
                    % (label, pos, container_end - end)
                )
                container_end = end
            if pos in self.seen_containers:  # another header pointed here: read already
                pos = max(container_end, self.seen_containers[pos])
                continue
            self.seen_containers[pos] = container_end
            self.walk_entries(body, container_end, section, listed, member)
            pos = container_end
        if pos < end and not self.is_zero(pos, end):
            self.fail("%s: unrecognised bytes at 0x%x" % (label, pos))

    def walk_entries(
        self, pos: int, end: int, section: str, listed: bool, member: Optional[str]
    ) -> None:
        buf = self.buf
        label = section or "fatbin"
        released = pos - pos % mmap.PAGESIZE
        while pos + ENTRY_HEADER.size <= end:
            if pos in self.seen_entries:  # the rest of this chain was read from another start
                return
            if pos - released >= SEARCH_WINDOW:  # each header read maps ~64 KiB around it
                released = self.release(released, pos)
            self.spend(1)
            (kind_code, _, header_size, payload_size, compressed_size, _, minor, major, arch,
             _, _, flags, _, uncompressed) = ENTRY_HEADER.unpack_from(buf, pos)  # fmt: skip
            kind = ENTRY_KINDS.get(kind_code)
            payload = pos + header_size
            if (
                kind is None
                or not ENTRY_HEADER.size <= header_size <= MAX_ENTRY_HEADER
                or payload + payload_size > end
            ):
                if kind_code == 0 and self.is_zero(pos, end):
                    return  # padding after the last entry
                self.fail("%s: invalid entry header at 0x%x" % (label, pos))
                return
            if flags & FLAG_ZSTD:
                compression = "zstd"
            elif flags & FLAG_LZ4:
                compression = "lz4"
            else:
                compression = "unknown" if compressed_size else "none"
            stored = compressed_size if compressed_size else payload_size
            impossible = _impossible_sizes(payload_size, compressed_size, uncompressed)
            if impossible:
                self.fail("%s: invalid entry at 0x%x: %s" % (label, pos, impossible))
                pos = payload + payload_size
                continue
            self.seen_entries.add(pos)
            kernels = None
            if kind == "sass" and compression == "none" and payload_size <= KERNEL_CHECK_MAX:
                kernels = self.cubin_has_text(payload, payload + payload_size)
            if flags & FLAG_ARCH_SPECIFIC:
                variant = "a"
            elif flags & FLAG_FAMILY:
                variant = "f"
            else:
                variant = ""
            self.entries.append(
                KernelEntry(
                    kind=kind,
                    arch=arch,
                    variant=variant,
                    ptx_isa="%d.%d" % (major, minor) if kind == "ptx" else None,
                    compression=compression,
                    stored_size=stored,
                    uncompressed_size=uncompressed if compressed_size and uncompressed else stored,
                    section=section,
                    offset=pos,
                    debug=bool(flags & FLAG_DEBUG),
                    listed=listed and kind != "ltoir",
                    member=member,
                    kernels=kernels,
                )
            )
            pos = payload + payload_size
        if pos < end and not self.is_zero(pos, end):
            self.fail("%s: truncated entry header at 0x%x" % (label, pos))

    def cubin_has_text(self, base: int, end: int) -> Optional[bool]:
        """Whether the cubin in [base, end) has a ``.text`` section (a kernel); None if unsure.

        Quiet: a payload that is not a well-formed cubin is not this check's to report."""
        buf = self.buf
        if end - base < ELF64_HEADER.size or buf[base : base + 4] != ELF_MAGIC:
            return None
        fields = ELF64_HEADER.unpack_from(buf, base)
        ident, machine = fields[0], fields[2]
        shoff, shentsize, shnum, shstrndx = fields[6], fields[11], fields[12], fields[13]
        if ident[4] != 2 or ident[5] != 1 or machine != EM_CUDA:
            return None
        table = base + shoff
        if shentsize != ELF64_SECTION.size or not shstrndx < shnum or table + shnum * 64 > end:
            return None
        names = ELF64_SECTION.unpack_from(buf, table + shstrndx * shentsize)
        start, stop = base + names[4], base + names[4] + names[5]
        if stop > end:
            return None
        strtab = bytes(buf[start:stop])
        offsets = memoryview(bytes(buf[table : table + shnum * shentsize])).cast("I")[0::16]
        return any(strtab.startswith(b".text", offset) for offset in offsets)

    def valid_container_at(self, pos: int, end: int) -> bool:
        """A strict check for a container found by searching data: header and first entry."""
        if pos + CONTAINER_HEADER.size + ENTRY_HEADER.size > end:
            return False
        _, version, header_size, fat_size = CONTAINER_HEADER.unpack_from(self.buf, pos)
        body = pos + CONTAINER_HEADER.size
        if version != 1 or header_size != CONTAINER_HEADER.size or body + fat_size > end:
            return False
        if fat_size < ENTRY_HEADER.size:
            return False
        kind, entry_version, entry_header, payload_size = struct.unpack_from(
            "<HHIQ", self.buf, body
        )
        return (
            kind in ENTRY_KINDS
            and entry_version == 0x0101
            and ENTRY_HEADER.size <= entry_header <= MAX_ENTRY_HEADER
            and entry_header % 8 == 0
            and body + entry_header + payload_size <= body + fat_size
        )

    # -- deep search of data sections ------------------------------------------------------------

    def search_section(self, start: int, end: int, section: str, member: Optional[str]) -> None:
        """Validated containers and bare cubins in [start, end): device code cuobjdump skips.

        Two searches cover the bytes between containers: one for the container magic, one for
        the cubin ELF ident. Containers themselves are never searched: a valid one is skipped
        by its size, so back-to-back containers (cuFFT's .ldata, cuBLASLt's .cask_resource)
        cost one header read each and no scan."""
        buf = self.buf
        if end - start >= READAHEAD_MIN and hasattr(buf, "madvise"):
            # This range is read front to back: undo the file's MADV_RANDOM here so a cold cache
            # reads ahead (4x faster cold on cuBLASLt). Not MADV_SEQUENTIAL: pages touched through
            # such a mapping count as unused and are reclaimed first, making the next run cold.
            aligned = start - start % mmap.PAGESIZE
            with contextlib.suppress(OSError, ValueError, AttributeError):
                buf.madvise(mmap.MADV_NORMAL, aligned, end - aligned)
        pos = start
        released = start - start % mmap.PAGESIZE  # pages before this were handed back
        while pos < end:
            if pos - released >= SEARCH_WINDOW:
                released = self.release(released, pos)
            if buf[pos : pos + 4] == CONTAINER_MAGIC:
                hit = pos  # the next container follows the last one directly: no search
            else:
                pos, data_end = self.data_at(pos, end)  # holes of a sparse file hold nothing
                if pos >= end:
                    break
                # One window at a time; a magic that starts in it may end past it.
                window_end = min(data_end, pos + SEARCH_WINDOW)
                # The 4-byte magic, not the 8-byte fixed header: a needle ending in 0xba is
                # searched ~20 % faster than one ending in 0x00 (zero bytes fill data sections).
                hit = buf.find(CONTAINER_MAGIC, pos, min(data_end, window_end + 3))
                gap_end = window_end if hit < 0 else hit
                # The cubin ident search covers the same bytes: idents that start before
                # gap_end (with no container in the window, one may end past it).
                ident_end = min(data_end, gap_end + len(CUBIN_IDENT) - 1) if hit < 0 else hit
                self.spend((gap_end - pos) >> 9)  # two searches: one unit per KiB each
                # A valid container is rarely inside a cubin; cubins end where their sections do.
                cubin = buf.find(CUBIN_IDENT, pos, ident_end)
                while cubin >= 0:
                    cubin_end = self.cubin_at(cubin, end, section, False, member)
                    if cubin_end > gap_end:  # the container candidate was inside this cubin
                        break
                    next_from = cubin_end if cubin_end > cubin else cubin + 1
                    cubin = buf.find(CUBIN_IDENT, next_from, ident_end)
                else:
                    cubin_end = -1
                if cubin_end > gap_end:
                    pos = cubin_end
                    continue
                if hit < 0:
                    pos = window_end
                    continue
            if self.valid_container_at(hit, end):
                fat_size = struct.unpack_from("<Q", buf, hit + 8)[0]
                body = hit + CONTAINER_HEADER.size
                if hit not in self.seen_containers:
                    self.seen_containers[hit] = body + fat_size
                    self.walk_entries(body, body + fat_size, section, False, member)
                pos = body + fat_size
            else:
                pos = hit + 1

    def release(self, start: int, stop: int) -> int:
        """Hand the mapped pages of [start, stop) back (the page cache keeps them; a later read
        maps them again); returns where the next release starts."""
        upto = stop - stop % mmap.PAGESIZE
        if upto > start and hasattr(self.buf, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
            with contextlib.suppress(OSError, ValueError):
                self.buf.madvise(mmap.MADV_DONTNEED, start, upto - start)
        return max(start, upto)

    # -- ELF ---------------------------------------------------------------------------------

    def section_table(self, base: int, limit: int, where: str, only_fatbin: bool) -> Any:
        """The ELF header fields and the section table of the image in [base, limit).

        Returns (fields, sections); sections is None when there are none or, with
        ``only_fatbin``, when no section name mentions a fatbin (the common case for objects in
        static archives with thousands of sections: only the name table is read then)."""
        buf = self.buf
        if base + 52 > limit:
            self.fail("%struncated ELF header" % where)
            return None, None
        elf_class, data = buf[base + 4], buf[base + 5]
        if elf_class not in (1, 2) or data not in (1, 2):
            self.fail("%sunknown ELF class or byte order" % where)
            return None, None
        order = "<" if data == 1 else ">"
        wide = elf_class == 2
        header = struct.Struct(order + (ELF64_HEADER if wide else ELF32_HEADER).format[1:])
        entry = struct.Struct(order + (ELF64_SECTION if wide else ELF32_SECTION).format[1:])
        if base + header.size > limit:
            self.fail("%struncated ELF header" % where)
            return None, None
        fields = header.unpack_from(buf, base)
        shoff, shentsize, shnum, shstrndx = fields[6], fields[11], fields[12], fields[13]
        if shoff == 0:
            return fields, None
        if shentsize != entry.size:
            self.fail("%sunexpected section header size %d" % (where, shentsize))
            return fields, None
        table = base + shoff
        if table + shentsize > limit:
            self.fail("%struncated: the section headers are past the end" % where)
            return fields, None
        if shnum == 0 or shstrndx == 0xFFFF:  # extended numbering: real values in section 0
            first = entry.unpack_from(buf, table)
            shnum = shnum or first[5]
            if shstrndx == 0xFFFF:
                shstrndx = first[6]
        available = (limit - table) // shentsize
        if shnum > available:
            self.fail("%struncated: %d of %d section headers present" % (where, available, shnum))
            shnum = available
        if shnum > MAX_SECTIONS:
            self.fail("%s%d section headers: the first %d are read" % (where, shnum, MAX_SECTIONS))
            shnum = MAX_SECTIONS
        strtab = b""
        if shstrndx < shnum:
            names_header = entry.unpack_from(buf, table + shstrndx * shentsize)
            names_start = base + names_header[4]
            names_end = min(names_start + names_header[5], limit, names_start + (64 << 20))
            if names_start < names_end:
                strtab = bytes(buf[names_start:names_end])
        if only_fatbin and b"fatbin\0" not in strtab:
            return fields, None
        self.spend(shnum)
        raw = bytes(buf[table : table + shnum * shentsize])
        if wide and order == "<" and sys.byteorder == "little":
            # Columns straight out of the table: one C-level pass instead of a tuple per section.
            words = memoryview(raw).cast("I")
            quads = memoryview(raw).cast("Q")
            columns = (words[0::16].tolist(), words[1::16].tolist(), quads[1::8].tolist(),
                       quads[3::8].tolist(), quads[4::8].tolist())  # fmt: skip
        else:
            rows = [entry.unpack_from(raw, i * shentsize) for i in range(shnum)]
            columns = ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                       [r[4] for r in rows], [r[5] for r in rows])  # fmt: skip
        return fields, _Sections(strtab, base, *columns)

    def read_elf(self, base: int, limit: int, member: Optional[str]) -> str:
        """Device code in one ELF image in [base, limit). Returns "elf" or "cubin"."""
        buf = self.buf
        where = "%s: " % member if member else ""
        if base + 20 <= limit and struct.unpack_from("<H", buf, base + 18)[0] == EM_CUDA:
            self.cubin_at(base, limit, "", True, member, loose=True)
            return "cubin"
        # An archive member without any magic past its header cannot hide device code.
        deep = self.deep and (
            member is None
            or buf.find(CONTAINER_MAGIC, base, limit) >= 0
            or buf.find(CUBIN_IDENT, base + 4, limit) >= 0
        )
        fields, sections = self.section_table(base, limit, where, only_fatbin=not deep)
        if fields is not None and self.machine is None:
            self.machine = MACHINES.get(fields[2], "e_machine %d" % fields[2])
        if sections is None:
            return "elf"
        is_object = fields[1] == ET_REL
        if deep:
            indices = [
                i
                for i, (kind, flags, size) in enumerate(
                    zip(sections.types, sections.flags, sections.sizes)
                )
                if size and kind == SHT_PROGBITS and not flags & SHF_EXECINSTR
            ]
        else:
            indices = sorted(sections.named(b".nv_fatbin") + sections.named(b"__nv_relfatbin"))
        for i in indices:
            if sections.types[i] in (SHT_NULL, SHT_NOBITS) or not sections.sizes[i]:
                continue
            name = sections.name(i)
            offset = sections.offsets[i]
            end = offset + sections.sizes[i]
            fatbin_section = name in (".nv_fatbin", "__nv_relfatbin")
            if not fatbin_section and name.startswith(NOT_DATA_PREFIXES):
                continue
            if end > limit:
                self.fail(
                    "%struncated: section %s ends 0x%x bytes past the end"
                    % (where, name, end - limit)
                )
                end = limit
            if offset >= end or (offset, end) in self.seen_regions:
                continue  # empty, or read already through another header
            self.seen_regions.add((offset, end))
            if name == ".nv_fatbin":
                self.walk_containers(offset, end, name, True, member)
            elif name == "__nv_relfatbin":
                # cuobjdump lists the relocatable fatbins of objects, not of linked binaries.
                if is_object or deep:
                    self.walk_containers(offset, end, name, is_object, member)
            else:
                self.search_section(offset, end, name, member)
            if end - offset >= READAHEAD_MIN:  # the pages of a big section, read: handed back
                self.release(offset - offset % mmap.PAGESIZE, end)
        return "elf"

    def plausible_cubin(self, base: int, fields: Tuple[Any, ...]) -> bool:
        """Cheap checks of a cubin found by searching, before its section table is parsed: its
        name table is a string table, and no other cubin owns its section table. Each candidate
        costs a constant, so a data section of fake headers that share one huge table stays
        linear."""
        self.spend(1)
        shoff, shnum, shstrndx = fields[6], fields[12], fields[13]
        table = base + shoff
        if table in self.seen_tables or not 0 < shstrndx < shnum:
            return False
        names_type = struct.unpack_from("<I", self.buf, table + shstrndx * ELF64_SECTION.size + 4)
        if names_type[0] != SHT_STRTAB:
            return False
        self.seen_tables.add(table)
        return True

    def cubin_at(
        self,
        base: int,
        limit: int,
        section: str,
        listed: bool,
        member: Optional[str],
        loose: bool = False,
    ) -> int:
        """One bare cubin at ``base``; returns where it ends (``base`` when it is not a cubin)."""
        buf = self.buf
        if base in self.seen_cubins:  # found before, through another section header
            return self.seen_cubins[base]
        if base + ELF64_HEADER.size > limit:
            if loose:
                self.fail("truncated cubin header")
            return base
        fields = ELF64_HEADER.unpack_from(buf, base)
        ident, machine, e_flags = fields[0], fields[2], fields[7]
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
                self.fail("not a 64-bit little-endian cubin")
            return base
        if not loose and not self.plausible_cubin(base, fields):
            return base
        phoff, phentsize, phnum = fields[5], fields[9], fields[10]
        end = max(base + shoff + shnum * shentsize, base + phoff + phnum * phentsize)
        sections = self.section_table(base, limit, "", only_fatbin=False)[1] if shoff else None
        listing: List[Tuple[str, int, int]] = []
        if sections is not None:
            for i, sh_type in enumerate(sections.types):
                offset, size = sections.offsets[i], sections.sizes[i]
                if sh_type != SHT_NOBITS:
                    end = max(end, offset + size)
                listing.append((sections.name(i), offset, size))
        end = limit if loose else end  # a loose cubin is the whole file
        if end > limit:
            return base
        # The SM sits in bits 8-15 of e_flags from ELF ABI version 8 (OSABI 0x41) on; older
        # cubins keep it in bits 0-7, with 0x800 for an arch-specific ('a') build. 'a' targets
        # exist only from sm_90 on: below it the bit means something else (CUDA 9.0's sm_60
        # cubins set it; cuobjdump lists them as sm_60).
        new_layout = ident[7] == 0x41 or ident[8] >= 8
        arch = (e_flags >> 8) & 0xFF if new_layout else e_flags & 0xFF
        variant = "a" if not new_layout and e_flags & 0x800 and arch >= 90 else ""
        debug = False
        kernels = any(name.startswith(".text") for name, _, _ in listing) if listing else None
        for name, offset, size in listing:
            if name == ".debug_info":
                debug = True
            elif name == ".note.nv.tkinfo" and offset + size <= limit:
                # ptxas records its command line here: the only place a cubin keeps 'f'.
                match = TKINFO_ARCH.search(buf[offset : offset + min(size, 65536)])
                if match and int(match.group(1)) == arch:
                    variant = match.group(2).decode()
        self.entries.append(
            KernelEntry(
                kind="sass",
                arch=arch,
                variant=variant,
                ptx_isa=None,
                compression="none",
                stored_size=end - base,
                uncompressed_size=end - base,
                section=section,
                offset=base,
                debug=debug,
                listed=listed,
                member=member,
                kernels=kernels,
            )
        )
        self.seen_cubins[base] = end
        return end

    # -- static archives -------------------------------------------------------------------

    def read_archive(self) -> None:
        buf = self.buf
        pos = len(AR_MAGIC)
        long_names = b""
        while pos + 60 <= self.size:
            header = buf[pos : pos + 60]
            if header[58:60] != b"`\n":
                self.fail("archive: corrupt member header at 0x%x" % pos)
                return
            raw_name = header[0:16].rstrip(b" ")
            size_field = header[48:58].strip() or b"0"
            if not size_field.isdigit():  # int() takes "-60": the walk would loop back forever
                self.fail("archive: corrupt member size at 0x%x" % pos)
                return
            size = int(size_field)
            data = pos + 60
            end = data + size
            if end > self.size:
                self.fail("truncated: archive member at 0x%x runs past the end" % pos)
                end = self.size
            name = raw_name.decode("utf-8", "replace")
            if raw_name == b"//":
                long_names = bytes(buf[data : min(end, data + MAX_LONG_NAMES)])
            elif raw_name.startswith(b"#1/"):  # BSD: the name follows the header
                try:
                    name_len = int(raw_name[3:])
                except ValueError:
                    name_len = 0
                name = buf[data : data + name_len].rstrip(b"\0").decode("utf-8", "replace")
                data += name_len
            elif raw_name.startswith(b"/") and raw_name[1:].isdigit():
                at = int(raw_name[1:])
                stop = long_names.find(b"/\n", at)
                name = long_names[at : stop if stop >= 0 else None].decode("utf-8", "replace")
            elif raw_name.endswith(b"/") and raw_name not in (b"/", b"/SYM64/"):
                name = name[:-1]
            if raw_name not in (b"/", b"//", b"/SYM64/") and buf[data : data + 4] == ELF_MAGIC:
                self.read_elf(data, end, name)
            pos = end + (end & 1)  # members are 2-byte aligned


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


def _open_error(path: str, exc: OSError) -> str:
    """Why a path could not be opened, in words."""
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    if exc.errno == errno.ENOENT and os.path.islink(path):
        try:
            return "dangling symlink to %s" % os.readlink(path)
        except OSError:
            return "dangling symlink"
    if exc.errno == errno.EACCES or exc.errno == errno.EPERM:
        return "permission denied"
    return (exc.strerror or str(exc)).lower()


def read_binary(path: str, deep: bool = False) -> BinaryFacts:
    """The device code in one file. Never raises: problems are in ``error``."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (no effect on regular files)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        return BinaryFacts(path, 0, "unreadable", (), deep, _open_error(path, exc))
    try:
        return _read_open_file(path, fd, deep)
    except Exception as exc:  # a reader bug or an odd file must not end a scan
        return BinaryFacts(path, 0, "unreadable", (), deep, "%s: %s" % (type(exc).__name__, exc))
    finally:
        os.close(fd)


def read_cubin_at(path: str, offset: int) -> BinaryFacts:
    """A cubin stored at ``offset`` of a file (CuPy's kernel cache puts an md5 digest first).
    Never raises: problems are in ``error``."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        return BinaryFacts(path, 0, "unreadable", (), False, _open_error(path, exc))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size <= offset:
            return BinaryFacts(path, info.st_size, "other", (), False, "no cubin at %d" % offset)
        with contextlib.closing(mmap.mmap(fd, info.st_size, access=mmap.ACCESS_READ)) as buf:
            reader = _Reader(buf, info.st_size, False)
            reader.cubin_at(offset, info.st_size, "", True, None, loose=True)
            entries, error = tuple(reader.entries), reader.error_text()
        return BinaryFacts(path, info.st_size, "cubin", entries, False, error)
    except Exception as exc:  # a reader bug or an odd file must not end a scan
        return BinaryFacts(path, 0, "unreadable", (), False, "%s: %s" % (type(exc).__name__, exc))
    finally:
        os.close(fd)


def _read_open_file(path: str, fd: int, deep: bool) -> BinaryFacts:
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        return BinaryFacts(path, 0, "unreadable", (), deep, "is a directory")
    if not stat.S_ISREG(info.st_mode):
        return BinaryFacts(path, 0, "other", (), deep, "not a regular file")
    size = info.st_size
    try:
        head = os.pread(fd, 8, 0)
    except OSError as exc:
        return BinaryFacts(path, size, "unreadable", (), deep, _open_error(path, exc))
    kind = _kind_of(head)
    unread = _not_read(path, size, kind, deep)
    if unread is not None:
        return unread
    try:
        buf = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        return BinaryFacts(path, size, "unreadable", (), deep, "cannot map: %s" % exc)
    try:
        if hasattr(buf, "madvise") and hasattr(mmap, "MADV_RANDOM"):
            # Headers are scattered through the file: read-ahead would only pull in payloads.
            buf.madvise(mmap.MADV_RANDOM)
        return _read_buffer(path, buf, size, kind, deep, fd)
    finally:
        buf.close()


def _kind_of(head: bytes) -> str:
    """What the first 8 bytes say a file is: elf, archive, fatbin, thin (archive) or other."""
    if head[:4] == ELF_MAGIC:
        return "elf"
    if head == AR_MAGIC:
        return "archive"
    if head[:4] == CONTAINER_MAGIC:
        return "fatbin"
    return "thin" if head == THIN_AR_MAGIC else "other"


def _not_read(path: str, size: int, kind: str, deep: bool) -> Optional[BinaryFacts]:
    """The row of a file whose first bytes say there is nothing here to read, else None."""
    if kind == "thin":
        return BinaryFacts(
            path, size, "archive", (), deep, "thin archive: its members are separate files"
        )
    return BinaryFacts(path, size, "other", (), deep) if kind == "other" else None


def _read_buffer(path: str, buf: Any, size: int, kind: str, deep: bool, fd: int) -> BinaryFacts:
    """The device code in ``buf`` (an mmap of a file, or a member's bytes), known to be ``kind``."""
    reader = _Reader(buf, size, deep, fd)
    try:
        if kind == "elf":
            kind = reader.read_elf(0, size, None)
        elif kind == "archive":
            reader.read_archive()
        else:
            reader.walk_containers(0, size, "", True, None)
    except WorkBoundReached as exc:
        reader.errors.insert(0, str(exc))
        reader.error_count += 1
        kind = "unknown"
    return BinaryFacts(
        path, size, kind, tuple(reader.entries), deep, reader.error_text(), reader.machine
    )


def read_bytes(path: str, data: Union[bytes, bytearray], deep: bool = False) -> BinaryFacts:
    """The device code in a file's bytes that are not a file here (a wheel's or a conda
    package's member, decompressed): the same reader and validation as ``read_binary``.
    ``path`` names it in the result. Never raises: problems are in ``error``."""
    size = len(data)
    kind = _kind_of(bytes(data[:8]))
    unread = _not_read(path, size, kind, deep)
    if unread is not None:
        return unread
    try:
        return _read_buffer(path, data, size, kind, deep, -1)
    except Exception as exc:  # a reader bug or an odd member must not end a scan
        return BinaryFacts(path, 0, "unreadable", (), deep, "%s: %s" % (type(exc).__name__, exc))


# -- walking paths ------------------------------------------------------------------------------

Discovered = Tuple[str, Optional[BinaryFacts]]  # (path, None): read it; (path, facts): a ready row


def _row(path: str, reason: str) -> BinaryFacts:
    return BinaryFacts(path, 0, "unreadable", (), False, reason)


def _has_elf_magic(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == ELF_MAGIC
    except OSError:
        return False


def discover(paths: Iterable[str]) -> Iterator[Discovered]:
    """The files to read under ``paths``, each once, plus rows for paths that cannot be walked."""
    seen_files: Set[Tuple[int, int]] = set()
    seen_dirs: Set[Tuple[int, int]] = set()
    for path in paths:
        try:
            info = os.stat(path)
        except OSError as exc:
            yield path, _row(path, _open_error(path, exc))
            continue
        if stat.S_ISDIR(info.st_mode):
            yield from _walk_directory(path, info, seen_files, seen_dirs)
        else:
            key = (info.st_dev, info.st_ino)
            if key not in seen_files:
                seen_files.add(key)
                yield path, None


def _identity(item: os.DirEntry, link: bool, device: int) -> Tuple[int, int]:  # type: ignore[type-arg]
    """(dev, ino) of a directory entry: from readdir (no stat call) unless it is a symlink."""
    if link:
        sub = item.stat()
        return sub.st_dev, sub.st_ino
    return device, item.inode()


def _file_key(
    item: os.DirEntry,  # type: ignore[type-arg]
    candidate: bool,
    link: bool,
    device: int,
) -> Optional[Tuple[int, int]]:
    """The identity of a regular file worth reading, or None: a candidate name, or an executable
    whose first bytes are ELF's magic."""
    if item.name in NOT_BINARY_NAMES:
        return None
    if candidate:
        return _identity(item, link, device)
    sub = item.stat()
    if sub.st_mode & 0o111 and sub.st_size > 0 and _has_elf_magic(item.path):
        return sub.st_dev, sub.st_ino
    return None


def _walk_directory(
    top: str,
    info: os.stat_result,
    seen_files: Set[Tuple[int, int]],
    seen_dirs: Set[Tuple[int, int]],
) -> Iterator[Discovered]:
    top_key = (info.st_dev, info.st_ino)
    if top_key in seen_dirs:
        return
    seen_dirs.add(top_key)
    # Depth first, names sorted; each frame carries the (dev, ino) chain of its ancestors.
    # Entries that are not symlinks take their identity from readdir (parent's device, d_ino):
    # no stat call for the thousands of ordinary files and directories of a site-packages.
    stack: List[Tuple[str, Tuple[Tuple[int, int], ...]]] = [(top, (top_key,))]
    while stack:
        directory, ancestors = stack.pop()
        device = ancestors[-1][0]
        try:
            with os.scandir(directory) as scan:
                items = list(scan)
        except OSError as exc:
            yield directory, _row(directory, _open_error(directory, exc))
            continue
        items.sort(key=lambda item: item.name)
        subdirs: List[Tuple[str, Tuple[Tuple[int, int], ...]]] = []
        for item in items:
            name = item.name
            dot = name.rfind(".")
            if dot > 0 and name[dot:].lower() in TEXT_EXTENSIONS and not item.is_dir():
                continue
            candidate = CANDIDATE_NAME.search(name) is not None
            try:
                link = item.is_symlink()
                if item.is_dir():
                    key = _identity(item, link, device)
                    if key in ancestors:
                        yield (
                            item.path,
                            _row(item.path, "symlink loop (a directory that contains it)"),
                        )
                    elif key not in seen_dirs:
                        seen_dirs.add(key)
                        subdirs.append((item.path, (*ancestors, key)))
                    continue
                if item.is_file():
                    file_key = _file_key(item, candidate, link, device)
                    if file_key is not None and file_key not in seen_files:
                        seen_files.add(file_key)
                        yield item.path, None
                elif candidate and link:
                    os.stat(item.path)  # raises with the reason: dangling link or a loop
            except OSError as exc:
                if candidate or item.is_dir(follow_symlinks=False):
                    yield item.path, _row(item.path, _open_error(item.path, exc))
        stack.extend(reversed(subdirs))


def walk_binaries(
    paths: Iterable[str], deep: bool = False, progress: Optional[Progress] = None
) -> Iterator[BinaryFacts]:
    """``read_binary`` over every file under ``paths`` (see the module doc for which files);
    ``progress(done, total, path)`` is called as files are read."""
    found = list(discover(paths))
    to_read = [path for path, ready in found if ready is None]
    read = iter(read_binaries(to_read, deep, progress))
    for _, ready in found:
        yield next(read) if ready is None else replace(ready, deep=deep)


# -- reading many files: a deep read is shared with one helper process -------------------------

# A deep read searches every data section (~0.4 s per GB per search on a loaded 2-core host):
# below this many bytes of files a second process does not win back its start and transfer.
HELPER_MIN_BYTES = 256 << 20
QUEUE_RECORD = struct.Struct("<I")  # one file index in the work queue
Progress = Callable[[int, int, str], None]  # (files done, files in all, the last one)


class _Tally:
    """Files read so far, told to a ``Progress`` (files the helper read count when they come)."""

    def __init__(self, total: int, progress: Optional[Progress]) -> None:
        self.done = 0
        self.total = total
        self.progress = progress

    def __call__(self, path: str, files: int = 1) -> None:
        self.done += files
        if self.progress is not None:
            self.progress(self.done, self.total, path)


def read_binaries(
    paths: List[str], deep: bool = False, progress: Optional[Progress] = None
) -> List[BinaryFacts]:
    """``read_binary`` over ``paths``; the results are in the order of ``paths``.

    With ``deep``, when the files hold at least ``HELPER_MIN_BYTES`` and a CPU is idle, a forked
    helper process reads some of the files (POSIX only, and only from a process without other
    threads: forking one with threads can deadlock the child). The results are the ones one
    process gives, in the same order; whatever goes wrong with the helper only means this
    process reads its files."""
    results: List[Optional[BinaryFacts]] = [None] * len(paths)
    tally = _Tally(len(paths), progress)
    if deep and len(paths) > 1 and _helper_allowed():
        sizes = []
        for path in paths:
            try:
                sizes.append(os.stat(path).st_size)
            except OSError:
                sizes.append(0)
        if sum(sizes) >= HELPER_MIN_BYTES:
            # Biggest first: the last files handed out are small, so both finish together.
            order = sorted(range(len(paths)), key=lambda i: -sizes[i])
            # One round per pipe-full of indices: a write of up to PIPE_BUF bytes into an empty
            # pipe never blocks, so the whole queue is in place before the fork.
            per_round = max(1, getattr(select, "PIPE_BUF", 512) // QUEUE_RECORD.size)
            for at in range(0, len(order), per_round):
                _read_shared(paths, order[at : at + per_round], deep, results, tally)
    for i, facts in enumerate(results):
        if facts is None:
            results[i] = read_binary(paths[i], deep)
            tally(paths[i])
    return [facts for facts in results if facts is not None]


def _helper_allowed() -> bool:
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return False
    affinity = getattr(os, "sched_getaffinity", None)
    cpus = len(affinity(0)) if affinity else os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = 0.0
    # A second process pays only while a CPU is idle. Measured on 2 CPUs (whole-process
    # `kernels --deep`, torch site-packages): 2.54 -> 2.10 s at load 1.5, 2.47 -> 2.73 s at 2.1.
    return cpus > 1 and load < cpus


def _take(queue: int) -> Iterator[int]:
    """File indices from the shared work queue until it is empty. Each read takes one whole
    record: pipe reads are serialised, and the queue holds whole records only."""
    while True:
        record = os.read(queue, QUEUE_RECORD.size)
        if len(record) != QUEUE_RECORD.size:
            return
        yield QUEUE_RECORD.unpack(record)[0]


def _read_shared(
    paths: List[str],
    indices: List[int],
    deep: bool,
    results: List[Optional[BinaryFacts]],
    tally: Callable[[str], None] = lambda _path: None,
) -> None:
    """Read ``paths[i]`` for ``i`` in ``indices`` in this process and one forked helper, each
    taking the next index from a pipe; fills ``results``. Files the helper took but did not
    return stay None (the caller reads them)."""
    try:
        queue_r, queue_w = os.pipe()
    except OSError:
        return
    try:
        os.write(queue_w, b"".join(QUEUE_RECORD.pack(i) for i in indices))
        os.close(queue_w)
        queue_w = -1  # closed everywhere before the fork: an empty queue then reads as EOF

        def helper() -> bytes:
            done = [(i, read_binary(paths[i], deep)) for i in _take(queue_r)]
            return pickle.dumps(done, pickle.HIGHEST_PROTOCOL)

        def here() -> None:
            for i in _take(queue_r):
                results[i] = read_binary(paths[i], deep)
                tally(paths[i])

        _, sent = in_two_processes(helper, here)
        for i, facts in pickle.loads(sent) if sent else ():
            results[i] = facts
            tally(paths[i])
    except Exception:  # a failed pipe, fork or transfer: the caller reads what is missing
        pass
    finally:
        for fd in (queue_r, queue_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)


def collect_binaries(system: System, params: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Probe section "binaries": params {"paths": [...], "deep": bool, "detail": bool}.

    Without ``detail`` (default: with it) entries that differ only in offset and size come as
    one (``probe.summary``)."""
    paths = [str(p) for p in params.get("paths") or []]
    detail = bool(params.get("detail", True))
    found = walk_binaries(paths, bool(params.get("deep", False)), system.progress)
    return [binary_json(facts, detail) for facts in found]


__all__ = [
    "Discovered",
    "collect_binaries",
    "discover",
    "read_binaries",
    "read_binary",
    "read_bytes",
    "walk_binaries",
]
