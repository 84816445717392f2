"""One file's bytes while its device code is read: the work budget, errors, holes and pages.

The readers of each format (``elf``, ``fatcontainer``, ``deepsearch``, ``hostelf``, ``ar``) are
functions of a ``Reader``: the bytes (an mmap of a file, or a member's bytes), what was found so
far, and which regions were read already, so a region is read once however many headers point
at it. Nothing here raises to the caller but ``WorkBoundReached`` and ``NotRecorded`` (``fatbin``
reports them).

The readers take bytes from ``reader.buf`` by slicing it and search it with its ``find`` (or
``bytesearch.searcher``, which falls back to ``find``), never through the buffer protocol
(``struct.unpack_from``, ``memoryview``): a streamed member's ``buf`` is the headers kept as it
went by (``archives.kept.Kept``), which answers exactly those (tests/unit/test_streamread.py).
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

from .facts import KernelEntry

if TYPE_CHECKING:
    from .summary import Summary

# A deep search looks at this many bytes at a time, and hands the pages it has left behind back
# (MADV_DONTNEED: they stay in the page cache), so the memory of a scan does not grow with the
# largest data section (cuBLASLt's are 100 MB): 32 MiB ~ the time of 10 ms of searching.
SEARCH_WINDOW = 32 << 20
MAX_ERRORS = 4  # messages kept per file; the count of the rest is reported
# Work allowed per file, in units of one section header parsed, one entry or cubin header
# checked, or one KiB searched: far above any real library (cuBLASLt --deep: ~0.5 M), far below
# what a hostile file can ask for. A file that reaches it is "unknown" with the reason.
WORK_BUDGET = 16_000_000
ZERO_CHUNK = 1 << 20  # bytes compared at a time when checking that a range is zero
# Bytes one header pread brings: the next header asked for is often among them (each of
# cuFFT's 24,000 .ldata containers: its padding, container header and entry header, one read).
HEADER_BLOCK = 512
# Cubins of one file whose toolkit note is read (the first stored as is of each container): a
# library's cubins come from one or a few toolkits, and each look parses a section table.
TOOLKIT_READS = 16


_new_object = object.__new__


def entry_keeper(entries: List[KernelEntry]) -> Callable[..., None]:
    """A function that appends ``KernelEntry(...)`` of its arguments (the same fields, in order)
    to ``entries``, made 3x faster: the dataclass's frozen ``__init__`` sets each of 15 fields
    through ``object.__setattr__``, a third of a plain read of a torch environment (21,000
    entries). The object is the same: equal, hashable, its ``repr``, ``asdict`` and ``replace``
    unchanged (tests/unit/test_fatbin_fixtures.py)."""
    append = entries.append

    def keep(
        kind: str,
        arch: int,
        variant: str,
        ptx_isa: Optional[str],
        compression: str,
        stored_size: int,
        uncompressed_size: int,
        section: str,
        offset: int,
        debug: bool,
        listed: bool,
        member: Optional[str] = None,
        count: int = 1,
        kernels: Optional[bool] = None,
        relocatable: Optional[bool] = None,
    ) -> None:
        entry: KernelEntry = _new_object(KernelEntry)
        entry.__dict__.update(
            kind=kind,
            arch=arch,
            variant=variant,
            ptx_isa=ptx_isa,
            compression=compression,
            stored_size=stored_size,
            uncompressed_size=uncompressed_size,
            section=section,
            offset=offset,
            debug=debug,
            listed=listed,
            member=member,
            count=count,
            kernels=kernels,
            relocatable=relocatable,
        )
        append(entry)

    return keep


class WorkBoundReached(Exception):
    """A file asked for more work than ``WORK_BUDGET``: it is reported as "unknown"."""


class NotRecorded(Exception):
    """A streamed member's reader asked for bytes that were not kept as the stream went by
    (``archives.streamread``): the member is reported as "unknown" with the offset."""


class Reader:
    """One file's bytes (an mmap) and what was found in them so far."""

    def __init__(
        self, buf: Any, size: int, deep: bool, fd: int = -1, summary: Optional[Summary] = None
    ) -> None:
        self.buf = buf
        self.size = size
        self.deep = deep
        self.fd = fd  # for SEEK_DATA: holes of a sparse file are zero and never touched
        self.extent = (0, 0)  # the stretch of file data data_at found last
        self.entries: List[KernelEntry] = []
        self.summary = summary
        # Each entry found (KernelEntry's fields, in order): merged into its row of ``summary``
        # as it is found, with no object per entry; without one, kept in ``entries``.
        self.found = summary.add if summary is not None else entry_keeper(self.entries)
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
        # (kind, arch, flags, section, listed, member) of entries shown to hold a kernel: the
        # content of more such entries changes no verdict and is not looked at (fatcontainer)
        self.with_kernels: Set[Tuple[Any, ...]] = set()
        # a host ELF's DT_NEEDED names (None: not read) and RUNPATH (else RPATH) directories
        self.needed: Optional[Tuple[str, ...]] = None
        self.runpath: Tuple[str, ...] = ()
        # a linked host ELF's lib*.so* read-only strings if it imports dlopen (probe.binary.dlnames)
        self.dlopens: Optional[Tuple[str, ...]] = None
        self.compilers: Optional[Tuple[Any, ...]] = None  # probe.binary.rtcompilers
        self.cuda_release: Optional[str] = None  # probe.binary.banner
        self.loader_imports: Optional[Tuple[str, ...]] = None  # probe.binary.loadsyms
        self.loader_names: Optional[Tuple[str, ...]] = None  # probe.binary.loadsyms
        # the CUDA releases the toolkit notes of its cubins name (fatcontainer, elf.cubin_at),
        # and how many listed cubins were looked at for one (TOOLKIT_READS at most)
        self.toolkits: Set[str] = set()
        self.toolkit_reads = 0
        self._block_at = 0  # where the bytes of the last header pread start
        self._block = b""

    def found_entries(self) -> Tuple[KernelEntry, ...]:
        """What was found: one row per kind of entry with a summary, else every entry."""
        return self.summary.entries() if self.summary is not None else tuple(self.entries)

    def header(self, pos: int, size: int) -> Any:
        """The ``size`` bytes at ``pos`` (a header, well inside the file): one ``pread`` when
        there is a file, not a read through the mapping. The headers of a plain read are spread
        over hundreds of MB, one page each, and a page fault costs ~4x a 64-byte pread (5 vs
        1.1 us measured): a torch environment's ~12,000 faults were a third of its read.
        The pread brings ``HEADER_BLOCK`` bytes, and a header inside them needs none."""
        if self.fd < 0:
            return self.buf[pos : pos + size]
        at = pos - self._block_at
        if at < 0 or at + size > len(self._block):
            self._block = os.pread(self.fd, max(size, HEADER_BLOCK), pos)
            self._block_at, at = pos, 0
        return self._block[at : at + size]

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
        """Whether [start, end) holds only zero bytes; holes are not read, no more than
        ``ZERO_CHUNK`` bytes are copied at a time, and the pages read are handed back."""
        for pos, chunk, _ in self.data_pieces(start, end, ZERO_CHUNK):
            if self.buf[pos:chunk].strip(b"\0"):
                return False
        return True

    def find(self, needle: bytes, start: int, end: int) -> int:
        """Where ``needle`` first starts in [start, end), or -1. ``needle`` holds no zero byte,
        so holes of a sparse file cannot hold it and are skipped; the file data is searched a
        window at a time, one unit of work per KiB, and the pages searched are handed back (a
        2.5 GiB sparse section with no container in it: not 2.5 GiB of zero pages mapped)."""
        for pos, window, stop in self.data_pieces(start, end, SEARCH_WINDOW):
            hit: int = self.buf.find(needle, pos, min(stop, window + len(needle) - 1))
            if hit >= 0:
                return hit
        return -1

    def data_pieces(self, start: int, end: int, size: int) -> Iterator[Tuple[int, int, int]]:
        """(piece start, piece end, end of its data run): the file data of [start, end) in
        pieces of at most ``size`` bytes, holes of a sparse file skipped; each piece is paid for
        (one unit of work per KiB), and once ``SEARCH_WINDOW`` bytes were gone through, the
        pages behind are handed back."""
        pos = start
        released = start - start % mmap.PAGESIZE
        while pos < end:
            pos, stop = self.data_at(pos, end)
            while pos < stop:
                piece = min(stop, pos + size)
                self.spend((piece - pos) >> 10)
                yield pos, piece, stop
                pos = piece
                if pos - released >= SEARCH_WINDOW:
                    released = self.release(released, pos)

    def padded_magic(self, pos: int, stop: int, magic: bytes) -> int:
        """Where ``magic`` starts when only zero bytes lie between ``pos`` and it, wholly in
        [pos, stop); else -1 (``magic`` starts with a non-zero byte)."""
        lead = self.header(pos, stop - pos)  # a pread for a file: no page fault
        padding = len(lead) - len(lead.lstrip(b"\0"))
        return pos + padding if lead[padding : padding + len(magic)] == magic else -1

    def release(self, start: int, stop: int) -> int:
        """Hand the mapped pages of [start, stop) back (the page cache keeps them; a later read
        maps them again); returns where the next release starts."""
        upto = stop - stop % mmap.PAGESIZE
        if upto > start and hasattr(self.buf, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
            with contextlib.suppress(OSError, ValueError):
                self.buf.madvise(mmap.MADV_DONTNEED, start, upto - start)
        return max(start, upto)
