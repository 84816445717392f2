"""A native member read as its decompressed bytes stream by: one pass, bounded memory, no disk.

A member too large to hold in memory (an 800 MB ``libtorch_cuda.so`` in a wheel, a container
layer's library) is read once, front to back, as it is decompressed. The file reader
(``fatbin.read_with``: ``hostelf``, ``fatcontainer``, ``deepsearch``, ``elf``, ``ar``) needs
random access, above all to an ELF image's section table, at the end after the sections it
describes. So the pass keeps, as the bytes go by, every byte that reader can ask for, and the
reader runs unchanged over what was kept (``Kept``: the member's own offsets, ``archives.kept``).

What is kept (``Collector``), found as the bytes go by, each rule following headers forward:

- every position of the container magic, and with ``deep`` of the cubin ELF ident (the searches
  of ``walk_containers`` and ``search_section`` are answered from these lists);
- at each magic, the container header and the first entry header; along each container, every
  entry header (the chain ``walk_entries`` follows) and the 16 bytes after the container; for a
  small uncompressed SASS payload, what ``cubin_has_text`` reads; of other small SASS and PTX,
  whether each holds a kernel (``content.has_kernel``, answered as it goes by: ``told_kernels``),
  or its payload while ``MAX_PAYLOADS`` allows (one not kept is "not looked at"); with ``deep``,
  the first bytes of each SASS payload not Zstandard-compressed (``content.is_relocatable``);
- of each ELF image (the member, an archive's member, a payload cubin, a cubin candidate): its
  header, its section table when the stream reaches it, and its section-name table and (cubins)
  notes, which precede the table: they are taken from the last ``LOOKBEHIND`` bytes;
- of a 64-bit little-endian library: its program headers, its dynamic section, and, as the
  bytes before that section go by (where its string table is), each string that may be a needed
  name or a search path (it holds ``.so`` or ``$ORIGIN``) from its start: what
  ``elf.dynamic_needs`` reads (a name that holds neither is not kept: its needs are unknown);
- of a library, its section-name table also where it lies more than ``LOOKBEHIND`` before the
  section table (``NAMES_MARK``: the table holds its own section's name), and ``MATCH_MAX`` bytes
  at each of the first ``TABLE_HITS`` table strings of a run-time compiler and toolkit banners;
- of a linked 64-bit library, what tells the names it may dlopen (``streamnames``): its first
  ``FRONT_KEPT`` bytes, its ``.dynsym``/``.dynstr`` after the section table, each such string;
- of the first compressed cubins, the bytes that hold their toolkit note (``_note``);
- an archive's member headers (a forward chain) and its long-name table;
- where the reader may ask whether a range is zero (after each chain), the next non-zero byte.

Memory is the lookbehind, the chunk being read and the kept bytes (``MAX_KEPT``; payloads
``MAX_PAYLOADS``, so that later headers, the section table above all, are still kept); nothing is
written anywhere. Where the reader asks for bytes not kept (a section that does not start with a
container, names more than ``LOOKBEHIND`` before a cubin's section table, headers past the
bound), ``Kept`` raises ``NotRecorded``: the member is "unknown" with the offset, never a guess.
"""

from __future__ import annotations

import collections
import heapq
import struct
import zlib
from array import array
from collections.abc import Callable
from typing import IO, Any

from archgap.probe.binary.ar import AR_MAGIC
from archgap.probe.binary.binreader import TOOLKIT_READS
from archgap.probe.binary.bytesearch import searcher
from archgap.probe.binary.content import PREFIX_STORED, has_kernel, note_span
from archgap.probe.binary.deepsearch import PADDING_PEEK, SEARCH_MIN
from archgap.probe.binary.elf import (
    CUBIN_IDENT,
    ELF32_HEADER,
    ELF64_DYN,
    ELF64_HEADER,
    ELF64_PROGRAM,
    ELF_MAGIC,
    EM_CUDA,
    MAX_DYNAMIC,
    MAX_NEED_NAME,
    MAX_SECTIONS,
    PT_DYNAMIC,
    PT_LOAD,
)
from archgap.probe.binary.fatbin import kind_of, read_with
from archgap.probe.binary.fatcontainer import (
    CONTAINER_HEADER,
    CONTAINER_MAGIC,
    ENTRY_HEADER,
    ENTRY_KINDS,
    FLAG_ARCH_SPECIFIC,
    FLAG_FAMILY,
    FLAG_LZ4,
    FLAG_ZSTD,
    KERNEL_CHECK_MAX,
    MAX_ENTRY_HEADER,
)
from archgap.probe.binary.rtcompilers import MATCH_MAX, NVPTX_MARK, NVRTC_MARK, TABLE_LITERALS
from archgap.probe.facts import BinaryFacts

from .kept import NONZERO, Kept, KeptReader
from .streamnames import SO_MARK, SonameCandidates, symbol_tables, with_dlopens

CHUNK = 1 << 20  # bytes read from the stream at a time
LOOKBEHIND = 16 << 20  # bytes kept behind the stream's position (names before a section table)
MAX_WANT = 16 << 20  # a pending range keeps the window this much past LOOKBEHIND at most
MAX_KEPT = 64 << 20  # bytes of kept headers and positions (with their bookkeeping) at most
MAX_PAYLOADS = 16 << 20  # bytes of those that are entries' payloads kept for the reader at most
PACK_MIN = 4096  # kept ranges larger than this are compressed (cubins' name tables)
PIN_COST = 96  # bookkeeping bytes counted per kept range
NOTE_MAX = 65536  # bytes of a cubin's note read (``cubin_at`` reads its ptxas command line)
MAX_NAMES = 64 << 20  # bytes of a section-name table read (as ``elf.section_table``)
SHT_NOTE = 7
ET_EXEC, ET_DYN = 2, 3
# Bytes kept from the start of a linked library (of its first segment at most): its .dynsym,
# which linkers put there (ld, lld, patchelf: 742 KB in at most, libtorch_cuda.so 2.14.1), tells
# whether it imports dlopen (``streamnames``); its place is known only at the end.
FRONT_KEPT = 4 << 20
NEED_MARKS = (b".so", b"$ORIGIN")  # what a needed name (libc.so.6) or a search path holds
MARK_TAIL = len(b"$ORIGIN") - 1  # a mark may straddle two chunks
# A section-name table holds the name of its own section: where a library's is, it is kept
# (NAMES_SPAN bytes each side, the last NAMES_KEPT places), for when it lies further than
# LOOKBEHIND before the section table (taichi_python.so: 27 MB of .symtab/.strtab between).
NAMES_MARK = b"\0.shstrtab"  # (a needle that ends in a rare pair of bytes: memmem's skip)
NAMES_SPAN = 64 << 10
NAMES_KEPT = 8
COMPILER_MARKS = (NVRTC_MARK, NVPTX_MARK)  # a run-time compiler's (probe.binary.rtcompilers)
TABLE_HITS = 4096  # its table strings and banners kept (MATCH_MAX bytes each) per literal
Positions = Any  # array("q") of offsets (``array.array`` is generic only to the type checker)
Rule = Callable[[int, bytes], None]  # (where the kept bytes start, the bytes)
# What ``want`` does with a range: keep it (past ``MAX_KEPT``: keeping stops), keep it while
# ``MAX_PAYLOADS`` allows, only hand it to its rule as it goes by, or keep it uncompressed (a
# library's symbol tables: zlib took 30-110 ms per MiB of them here, more than the reading).
KEEP, OPTIONAL, LOOK, RAW = 0, 1, 2, 3


class Collector:
    """One pass over a member's bytes, keeping what the file reader can ask for (see above)."""

    def __init__(self, size: int, deep: bool) -> None:
        self.size = size
        self.deep = deep
        self.pos = 0  # bytes seen
        self.window: collections.deque[tuple[int, bytes]] = collections.deque()  # the lookbehind
        self.window_bytes = 0
        self.tail = b""  # the last bytes seen: a needle may straddle two chunks
        self.tail_length = len(CUBIN_IDENT) - 1
        self.pins: dict[int, bytes] = {}
        self.packed: dict[int, tuple[int, bytes]] = {}  # large ranges, compressed: names tables
        self.kept = 0
        self.lost_at = size  # where keeping stopped (the bound was reached)
        self.needles: dict[bytes, Positions] = {CONTAINER_MAGIC: array("q")}
        if deep:
            self.needles[CUBIN_IDENT] = array("q")
        self.nonzero: dict[int, int] = {}
        self.zeros_before: dict[int, int] = {}  # container magic -> zero bytes just before it
        self.waiting_zero: list[int] = []  # positions whose first non-zero byte is not seen yet
        # (end, order, start, rule, what is done with it: KEEP, OPTIONAL, LOOK)
        self.wants: list[tuple[int, int, int, Rule | None, int]] = []
        self.payloads = 0  # bytes of OPTIONAL ranges kept
        self.told: dict[int, bool | None] = {}  # payload -> content.has_kernel's answer
        self.with_kernels: set[tuple[str, int, int]] = set()  # (kind, arch, variant flags)
        self.names: collections.deque[tuple[int, bytes]] = collections.deque(maxlen=NAMES_KEPT)
        self.order = 0
        self.followed: dict[int, int] = {}  # entry header -> the furthest end followed from it
        self.images: dict[int, bool] = {}  # ELF images whose section table is wanted
        self.marking: list[tuple[int, int]] = []  # [start, end): a library's strings are kept
        self.mark_tail = b""
        self.sonames: SonameCandidates | None = None  # a linked library's (``streamnames``)
        self.notes = 0  # compressed cubins whose note's bytes are kept (the reader's first reads)

    # -- the pass ---------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        start = self.pos
        self.pos += len(data)
        self.window.append((start, data))
        self.window_bytes += len(data)
        self._find_needles(start, data)
        self._settle_zeros(start, data)
        self._serve()
        if self.marking or self.sonames is not None:
            self._mark_strings(start, data)
        self._trim()

    def _trim(self) -> None:
        """Drop the oldest chunks past ``LOOKBEHIND``, but not those a pending range starts in
        (unless the window would pass ``LOOKBEHIND + MAX_WANT``)."""
        needed = -1
        while self.window_bytes - len(self.window[0][1]) >= LOOKBEHIND:
            start, oldest = self.window[0]
            if self.window_bytes - len(oldest) < LOOKBEHIND + MAX_WANT:
                if needed < 0:
                    needed = min((w[2] for w in self.wants), default=self.size)
                if needed < start + len(oldest):
                    return
            self.window_bytes -= len(self.window.popleft()[1])

    def finish(self) -> None:
        self._serve()  # what the last bytes' strings asked for (``_mark_strings``)
        for start, data in self.names:
            self._keep(start, data)
        for pos in self.waiting_zero:  # nothing but zeros after it
            self.nonzero[pos] = self.size
        self.waiting_zero = []

    def _find_needles(self, start: int, data: bytes) -> None:
        joined = self.tail + data
        base = start - len(self.tail)
        self.tail = joined[-self.tail_length :]
        with searcher(joined, 0, len(joined)) as (find, _):  # memmem: ~3x bytes.find
            for needle, positions in self.needles.items():
                # a needle found in the tail kept from the last chunk was counted then
                at = find(needle, max(0, len(joined) - len(data) - len(needle) + 1), len(joined))
                while at >= 0:
                    if self.kept + 8 > MAX_KEPT:
                        self._lose(base + at)
                        return
                    self.kept += 8
                    positions.append(base + at)
                    if needle == CONTAINER_MAGIC:
                        self._note_padding(base + at)
                        self.want(base + at, SEARCH_MIN, self._container)
                    elif needle == NAMES_MARK:
                        self._names_mark(base + at)
                    elif needle in TABLE_LITERALS:  # matched by rtcompilers and the banner
                        if len(positions) <= TABLE_HITS:
                            self.want(base + at, MATCH_MAX)
                    elif needle not in COMPILER_MARKS:  # (their positions answer rtcompilers)
                        self.want(base + at, ELF64_HEADER.size, self._cubin_candidate)
                    at = find(needle, at + 1, len(joined))

    def _mark_strings(self, start: int, data: bytes) -> None:
        """Each string that may be a needed name or a search path, in the bytes of a library
        before its dynamic section: kept from its start; and each that may be a dlopen name."""
        self.marking = [r for r in self.marking if r[1] > start - MARK_TAIL]
        if not self.marking:
            return self._find_sonames(start, data)
        if self.sonames is not None:
            self.sonames.note_searched(start, start + len(data))
        joined = self.mark_tail + data
        base = start - len(self.mark_tail)
        self.mark_tail = joined[-MARK_TAIL:]
        with searcher(joined, 0, len(joined)) as (find, _):
            for needle in NEED_MARKS:
                at = find(needle, max(0, len(joined) - len(data) - len(needle) + 1), len(joined))
                while at >= 0:
                    self._mark(base + at)
                    if needle == SO_MARK:
                        self._soname(base + at)
                    at = find(needle, at + 1, len(joined))

    def _find_sonames(self, start: int, data: bytes) -> None:
        """Each ``.so`` past a library's dynamic section (``SonameCandidates.search``)."""
        if self.sonames is not None:
            for pos in self.sonames.search(start, data, self.mark_tail):
                self._soname(pos)
            self.mark_tail = (self.mark_tail + data[-MARK_TAIL:])[-MARK_TAIL:]

    def _soname(self, pos: int) -> None:
        """A ``.so`` in a linked library: the bytes it is judged from, as they go by."""
        names = self.sonames
        if names is not None:
            first, length = names.window(pos)
            self.want(first, length, lambda at, got: names.look(pos, at, got), LOOK)

    def _mark(self, pos: int) -> None:
        if not any(first <= pos < end for first, end in self.marking):
            return
        before = self._window_bytes(max(0, pos - MAX_NEED_NAME), pos)
        nul = before.rfind(b"\0") if before else -1
        if before is None or nul < 0:
            return  # longer than a name is read, or its start is gone: not a name to keep
        first = pos - len(before) + nul + 1
        self.want(first, pos - first + MAX_NEED_NAME)

    def _names_mark(self, pos: int) -> None:
        """The bytes around it, held as they are until the pass ends; only the last
        ``NAMES_KEPT`` (a library's own table comes after its cubins') are then kept."""
        start = max(0, pos - NAMES_SPAN)
        self.want(start, 2 * NAMES_SPAN, lambda at, got: self.names.append((at, got)), LOOK)

    def _note_padding(self, magic: int) -> None:
        """The zero bytes just before a container magic, up to ``PADDING_PEEK`` (the deep
        search looks past padding to the next container: ``padded_magic``)."""
        before = self._window_bytes(max(0, magic - PADDING_PEEK), magic) or b""
        zeros = len(before) - len(before.rstrip(b"\0"))
        if zeros:
            self.zeros_before[magic] = zeros

    def _lose(self, at: int) -> None:
        self.lost_at = min(self.lost_at, at)

    def want(self, start: int, length: int, rule: Rule | None = None, how: int = KEEP) -> None:
        """Keep [start, start + length) (clipped to the member; ``how``: see ``KEEP``) and hand
        it to ``rule``."""
        end = min(start + length, self.size)
        if start < 0 or start >= end or start >= self.lost_at:
            return
        self.order += 1
        heapq.heappush(self.wants, (end, self.order, start, rule, how))

    def _serve(self) -> None:
        while self.wants and self.wants[0][0] <= self.pos:
            end, _, start, rule, how = heapq.heappop(self.wants)
            data = self._window_bytes(start, end)
            if data is None:  # passed before it was known to be needed, and out of the window
                continue
            if how == OPTIONAL:
                # a payload past the budget is not kept, and the pass goes on keeping headers
                if self.payloads + len(data) <= MAX_PAYLOADS and self._keep(start, data):
                    self.payloads += len(data)
            elif how in (KEEP, RAW) and not self._keep(start, data, how == RAW):
                self._lose(start)
                continue
            if rule is not None:
                rule(start, data)

    def _keep(self, start: int, data: bytes, raw: bool = False) -> bool:
        """Keep ``data`` (large ranges compressed, unless ``raw``); False when that would pass
        ``MAX_KEPT``."""
        if len(data) <= PACK_MIN or raw:
            if len(self.pins.get(start, b"")) >= len(data):
                return True
            stored: Any = data
            cost = len(data)
        else:
            if self.packed.get(start, (0, b""))[0] >= len(data):
                return True
            stored = (len(data), zlib.compress(data, 1))
            cost = len(stored[1])
        if self.kept + cost + PIN_COST > MAX_KEPT:
            return False
        self.kept += cost + PIN_COST
        (self.pins if len(data) <= PACK_MIN or raw else self.packed)[start] = stored
        return True

    def _window_bytes(self, start: int, end: int) -> bytes | None:
        if not self.window or start < self.window[0][0]:
            return None
        parts = []
        for at, chunk in self.window:
            if at + len(chunk) <= start:
                continue
            if at >= end:
                break
            parts.append(chunk[max(0, start - at) : end - at])
        return b"".join(parts)

    def zero_query(self, pos: int) -> None:
        """Note the first non-zero byte at or after ``pos`` (the reader may ask whether a range
        from ``pos`` is zero)."""
        if pos >= self.size or pos in self.nonzero:
            return
        if pos >= self.pos:
            self.waiting_zero.append(pos)
            return
        seen = self._window_bytes(pos, self.pos)
        if seen is None:
            return
        match = NONZERO.search(seen)
        if match:
            self.nonzero[pos] = pos + match.start()
        else:
            self.waiting_zero.append(pos)

    def _settle_zeros(self, start: int, data: bytes) -> None:
        waiting = []
        for pos in self.waiting_zero:
            match = NONZERO.search(data, max(0, pos - start)) if pos < start + len(data) else None
            if match:
                self.nonzero[pos] = start + match.start()
            else:
                waiting.append(pos)
        self.waiting_zero = waiting

    # -- the rules: what the reader will read, following headers forward --------------------

    def _container(self, pos: int, data: bytes) -> None:
        """A container magic (``walk_containers``, ``valid_container_at``)."""
        if len(data) < CONTAINER_HEADER.size:
            return
        _, version, header_size, fat_size = CONTAINER_HEADER.unpack(data[: CONTAINER_HEADER.size])
        if version != 1 or header_size != CONTAINER_HEADER.size:
            self.zero_query(pos + 4)  # the walk looks on from the next bytes
            return
        body = pos + header_size
        end = body + fat_size
        self.want(end, CONTAINER_HEADER.size)  # where the walk looks for the next container
        self.zero_query(end)
        self._entry(body, data[header_size:], end)

    def _entry(self, pos: int, data: bytes, end: int) -> None:
        """An entry header of the container ending at ``end`` (``walk_entries``)."""
        self.zero_query(pos)
        if len(data) < ENTRY_HEADER.size or self.followed.get(pos, -1) >= end:
            return  # the member ends here, or this chain was followed to this end already
        self.followed[pos] = end
        (kind, _, header_size, payload_size, compressed, _, _, _, arch,
         _, _, flags, _, uncompressed) = ENTRY_HEADER.unpack(data[: ENTRY_HEADER.size])  # fmt: skip
        if kind not in ENTRY_KINDS or not ENTRY_HEADER.size <= header_size <= MAX_ENTRY_HEADER:
            return
        payload = pos + header_size
        following = payload + payload_size
        self._payload(payload, payload_size, compressed, uncompressed, kind, arch, flags)
        if following + ENTRY_HEADER.size <= end:
            self.want(following, ENTRY_HEADER.size, lambda at, got: self._entry(at, got, end))
        else:
            self.zero_query(following)

    def _payload(
        self, at: int, size: int, compressed: int, uncompressed: int, code: int, arch: int,
        flags: int,
    ) -> None:  # fmt: skip
        """What the reader reads of an entry's payload (``walk_entries``)."""
        packed = compressed or flags & (FLAG_LZ4 | FLAG_ZSTD)
        unpacked = uncompressed if compressed and uncompressed else size
        sass = ENTRY_KINDS[code] == "sass"
        if ENTRY_KINDS[code] == "ltoir" or unpacked > KERNEL_CHECK_MAX:
            pass  # walk_entries looks at the content of small SASS and PTX only
        elif sass and not packed:  # cubin_has_text reads its header and tables
            self.want(at, ELF64_HEADER.size, self._elf_rule(cuda_only=True))
        else:  # content.has_kernel reads the whole payload: answered as it goes by
            self._look_for_kernels(at, size, compressed, unpacked, code, arch, flags)
        if self.deep and sass and not flags & FLAG_ZSTD:
            # content.is_relocatable reads a deep container's cubin's ELF header (not Zstandard)
            self.want(at, min(compressed or size, PREFIX_STORED))
        if sass and packed:
            self._note(at, compressed or size, unpacked, flags)

    def _note(self, at: int, stored: int, unpacked: int, flags: int) -> None:
        """A compressed cubin's bytes that hold its toolkit note, for the reader's first looks."""
        how = "zstd" if flags & FLAG_ZSTD else "lz4" if flags & FLAG_LZ4 else ""
        span = note_span(stored, unpacked, how)
        if span and self.notes < TOOLKIT_READS:
            self.notes += 1
            self.want(at, span, None, RAW)

    def _look_for_kernels(
        self, at: int, size: int, packed: int, unpacked: int, code: int, arch: int, flags: int
    ) -> None:
        """Whether a small PTX or compressed SASS entry holds a kernel, from its bytes as they
        go by (``told``) until one of its kind, target and variant does (``fatcontainer._kernels``
        does not look at those again in a section); then its payload, while ``MAX_PAYLOADS``
        allows. cuFFT 12.0's 8,646 such payloads took 57 MB packed, past ``MAX_KEPT`` before its
        section table went by (the member was "unknown"); unpacking each costs ~2 ms."""
        kind, stored = ENTRY_KINDS[code], packed or size
        key = (kind, arch, flags & (FLAG_ARCH_SPECIFIC | FLAG_FAMILY))
        if key in self.with_kernels:
            return self.want(at, stored, None, OPTIONAL)
        how = "zstd" if flags & FLAG_ZSTD else "lz4" if flags & FLAG_LZ4 else "none"
        compression = "unknown" if packed and how == "none" else how  # as walk_entries names it

        def tell(at: int, data: bytes) -> None:
            self.told[at] = has_kernel(data, 0, len(data), unpacked, kind, compression)
            if self.told[at]:
                self.with_kernels.add(key)

        self.want(at, stored, tell, LOOK)

    def _cubin_candidate(self, pos: int, data: bytes) -> None:
        """A cubin ident found with ``deep`` (``cubin_at``)."""
        self._elf_rule(cuda_only=True)(pos, data)

    def _elf_rule(self, cuda_only: bool) -> Rule:
        return lambda base, data: self._elf(base, data, cuda_only)

    def _elf(self, base: int, data: bytes, cuda_only: bool) -> None:
        """An ELF image's header: its section table is kept when the stream reaches it."""
        header = _elf_header(data)
        if header is None:
            return
        order, fields = header
        machine, shoff, entry, count = fields[2], fields[6], fields[11], fields[12]
        cuda = data[4] == 2 and data[5] == 1 and machine == EM_CUDA
        if not cuda and not cuda_only:
            self._library(base, data, fields)
        if (cuda_only and not cuda) or not shoff or entry not in (40, 64) or base in self.images:
            return
        self.images[base] = True
        table = base + shoff
        rule = lambda at, got: self._table(base, at, got, order, fields, cuda)  # noqa: E731
        self.want(table, entry * min(count or 1, MAX_SECTIONS), rule)

    def _library(self, base: int, data: bytes, fields: Any) -> None:
        """A host library's header: its names and compilers are searched for as the stream goes
        by (the outermost image only), and its program headers give its dynamic section."""
        if base == 0:
            for needle in (NAMES_MARK, *COMPILER_MARKS, *TABLE_LITERALS):
                self.needles.setdefault(needle, array("q"))
            self.tail_length = max(len(n) for n in self.needles) - 1
        if base == 0 and data[4:6] == b"\x02\x01" and fields[1] in (ET_EXEC, ET_DYN):
            # a linked 64-bit image: what it may dlopen (as hostelf reads it of a file)
            self.sonames = SonameCandidates()
        if data[4:6] == b"\x02\x01" and base not in self.images:
            phoff, phentsize, phnum = fields[5], fields[9], fields[10]
            if phentsize == ELF64_PROGRAM.size and phnum:  # what dynamic_needs reads
                rule = lambda at, got: self._segments(base, got)  # noqa: E731
                self.want(base + phoff, phentsize * phnum, rule)

    def _segments(self, base: int, data: bytes) -> None:
        """A library's program headers: its dynamic section is kept, and so are the strings
        before it that may be the names that section gives (``_mark_strings``); of a linked
        one, its first segment (the front: ``FRONT_KEPT``)."""
        rows = list(ELF64_PROGRAM.iter_unpack(data[: len(data) - len(data) % ELF64_PROGRAM.size]))
        loads = [row for row in rows if row[0] == PT_LOAD]
        if base == 0 and self.sonames is not None and loads:
            self.want(0, min(FRONT_KEPT, loads[0][2] + loads[0][5]), None, RAW)
            self.sonames.loaded(loads)
        for kind, _, offset, _, _, filesz, _, _ in rows:
            if kind == PT_DYNAMIC:
                self.want(base + offset, min(filesz, MAX_DYNAMIC * ELF64_DYN.size))
                self.marking.append((base, base + offset))
                return

    def _table(
        self, base: int, table: int, data: bytes, order: str, fields: Any, cuda: bool
    ) -> None:
        """An ELF image's section table: its name table, and a cubin's notes, precede it."""
        entry, count, names = fields[11], fields[12], fields[13]
        layout = struct.Struct(order + ("IIQQQQIIQQ" if entry == 64 else "IIIIIIIIII"))
        if len(data) < entry:
            return
        first = layout.unpack(data[:entry])
        if not count:  # extended numbering: the count is in section 0
            count = min(first[5], MAX_SECTIONS)
            if count > 1:
                self.want(table, entry * count, None)
        if names == 0xFFFF:
            names = first[6]
        rows = [layout.unpack(data[i : i + entry]) for i in range(0, len(data) - entry + 1, entry)]
        if names < len(rows):
            self.want(base + rows[names][4], min(rows[names][5], MAX_NAMES))
        for row in rows if cuda else ():
            if row[1] == SHT_NOTE:
                self.want(base + row[4], min(row[5], NOTE_MAX))
        for start, length in symbol_tables(rows) if base == 0 and self.sonames else ():
            self.want(start, min(length, MAX_WANT), None, RAW)  # where they lie ahead

    def archive(self) -> None:
        """An ``ar`` archive: its member headers, long names and ELF members (``read_archive``)."""
        self.want(len(AR_MAGIC), 60, self._ar_member)

    def _ar_member(self, pos: int, header: bytes) -> None:
        if len(header) < 60 or header[58:60] != b"`\n":
            return
        size_field = header[48:58].strip() or b"0"
        if not size_field.isdigit():
            return
        raw_name = header[0:16].rstrip(b" ")
        data = pos + 60
        end = min(data + int(size_field), self.size)
        if raw_name == b"//":
            self.want(data, min(end - data, 16 << 20))
        elif raw_name.startswith(b"#1/") and raw_name[3:].isdigit():
            self.want(data, int(raw_name[3:]))
            data += int(raw_name[3:])
        if raw_name not in (b"/", b"//", b"/SYM64/"):
            self.want(data, ELF64_HEADER.size, self._elf_rule(cuda_only=False))
        following = end + (end & 1)
        if following + 60 <= self.size:
            self.want(following, 60, self._ar_member)


def _elf_header(data: bytes) -> tuple[str, tuple[Any, ...]] | None:
    """(byte order, header fields) of the ELF image whose first bytes are ``data``."""
    if len(data) < 52 or data[:4] != ELF_MAGIC or not {data[4], data[5]} <= {1, 2}:
        return None
    order = "<" if data[5] == 1 else ">"
    layout = ELF64_HEADER if data[4] == 2 else ELF32_HEADER
    if len(data) < layout.size:
        return None
    return order, struct.unpack(order + layout.format[1:], data[: layout.size])


# A Windows image's MS-DOS, PE and optional headers and section table, kept from its start
PE_HEADERS_KEPT = 64 << 10  # (SizeOfHeaders: 1 KiB in the DLLs seen; 96 sections: 4 KiB)


def read_streamed(path: str, stream: IO[bytes], head: bytes, size: int, deep: bool) -> BinaryFacts:
    """The device code of a member of ``size`` bytes whose first bytes ``head`` were read from
    ``stream``, read in one pass as the rest streams by (see the module's text). The stream's
    own errors (a bad CRC, a truncated layer) propagate; the reader's are in ``error``."""
    kind = kind_of(head[:8])
    collector = Collector(size, deep)
    if kind == "archive":
        collector.archive()
    elif kind == "elf":
        collector.want(0, ELF64_HEADER.size, collector._elf_rule(cuda_only=False))
    elif kind == "pe":  # its headers and section table: at the start (the imports are not kept)
        collector.want(0, min(size, PE_HEADERS_KEPT))
    collector.feed(head)
    pos = len(head)
    while pos < size:
        data = stream.read(min(CHUNK, size - pos))
        if not data:
            break
        collector.feed(data)
        pos += len(data)
    if pos != size or stream.read(1):
        raise ValueError(f"member is not the {size} bytes its header says")
    collector.finish()
    kept = Kept(collector)
    collector.pins, collector.packed = {}, {}
    reader = KeptReader(kept, deep, collector)
    try:
        facts = read_with(path, reader, kind)
        return with_dlopens(facts, reader, collector.sonames, collector.lost_at)
    except Exception as exc:  # a reader bug or an odd member must not end a scan
        return BinaryFacts(path, 0, "unreadable", (), deep, f"{type(exc).__name__}: {exc}")


__all__ = ["Kept", "KeptReader", "read_streamed"]
