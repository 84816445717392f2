"""A wheel's small native members read from their compressed bytes, inflated in a few threads.

Inflating is most of a wheel's reading time (flashinfer-cubin: 15,970 deflated cubins, 427 MiB
that inflate to 1.8 GB). A member up to ``DIRECT_MAX`` bytes is read here without ``zipfile``'s
stream: its local header is checked (signature, and the name the central directory gives, as
``zipfile`` checks them), its compressed bytes are read in one piece, inflated in one call
(``INFLATER``: python-isal's ``isal_zlib`` when it is installed, as it is with archgap on
CPython for x86-64 and ARM64, else ``zlib``; both release the GIL while they inflate), and its
size and CRC-32 are checked against the central directory. Then the same reader as an
installed file's reads the bytes.

``WORKERS`` threads (the calling one included) each take the next member in order, read its
compressed bytes (one at a time: the file, or a ranged HTTP reader, is shared), and inflate and
read it; results are put back in member order, so the output does not depend on the threads.
While one thread reads a member (Python, holding the GIL), another inflates (C, without it).
Memory is bounded: the members in hand at once cost at most ``IN_MEMORY_MAX`` bytes together
(each counted as its compressed bytes and twice its size: the inflater's output is joined once),
or one member alone. Every thread is joined before ``read_members`` returns.

A member that cannot be read so (a bad local header, bytes missing, a size or CRC that differs,
deflate data that does not inflate) is an unreadable row with the reason; the others go on.
Members above ``DIRECT_MAX``, and those zipfile alone knows how to read (other compression
methods, encryption), are read by the caller's ``fallback`` after the threads are done: the
first through ``MemberStream`` (the same inflater, in pieces), the others by zipfile.
"""

from __future__ import annotations

import os
import struct
import threading
import zipfile
import zlib
from collections.abc import Callable
from typing import IO, Any

from archgap.probe.binary.fatbin import read_bytes
from archgap.probe.facts import BinaryFacts


def _inflater() -> Any:
    """python-isal's zlib (2-3x faster to inflate) when it is installed, else zlib."""
    try:
        from isal import isal_zlib  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return zlib
    return isal_zlib


INFLATER: Any = _inflater()  # tests set it to zlib to check the path without python-isal
WORKERS = max(1, min(4, os.cpu_count() or 1))
DIRECT_MAX = 16 << 20  # members up to this size are read here (memory: see the docstring)
STREAM_CHUNK = 1 << 20  # compressed bytes read at a time by ``MemberStream``
LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, then the name's and extra field's lengths
LOCAL_MAGIC = b"PK\x03\x04"
NATIVE_MAGIC = (b"\x7fELF", b"!<ar", b"\x50\xed\x55\xba")  # ELF, ar archive, fatbin container
PE_MAGIC = b"MZ"  # a Windows image (DLL, .pyd): its MS-DOS header's first two bytes
# encrypted (bit 0), compressed patch data (5), strong encryption (6): zipfile's reasons
ZIPFILE_ONLY_FLAGS = 0x1 | 0x20 | 0x40

Member = tuple[zipfile.ZipInfo, str]  # an entry, and the path it has in the results
Fallback = Callable[[zipfile.ZipInfo, str], BinaryFacts]


def read_members(
    zf: zipfile.ZipFile, members: list[Member], budget: int, deep: bool, fallback: Fallback
) -> list[BinaryFacts]:
    """The facts of each member, in the order given: those up to ``DIRECT_MAX`` (and at most
    ``budget``) read here, the others by ``fallback``. Never raises for a member's content."""
    results: list[BinaryFacts | None] = [None] * len(members)
    order = [k for k, (info, _) in enumerate(members) if direct(info, min(budget, DIRECT_MAX))]
    if order and zf.fp is not None:
        _Workers(zf.fp, members, order, results, deep, budget).run()
    return [r if r is not None else fallback(*members[k]) for k, r in enumerate(results)]


def direct(info: zipfile.ZipInfo, limit: int) -> bool:
    """Whether the member can be read from its compressed bytes here (not only by zipfile)."""
    return (
        info.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
        and not info.flag_bits & ZIPFILE_ONLY_FLAGS
        and info.file_size <= limit
    )


class _Workers:
    """Threads that take members in order, and the budget of bytes they hold."""

    def __init__(
        self,
        fp: IO[bytes],
        members: list[Member],
        order: list[int],
        results: list[BinaryFacts | None],
        deep: bool,
        budget: int,
    ) -> None:
        self.fp, self.members, self.order, self.results = fp, members, order, results
        self.deep, self.budget = deep, budget
        self.lock = threading.Condition()
        self.taken = 0  # members of ``order`` handed out
        self.held = 0  # bytes the threads hold
        self.stop = False

    def run(self) -> None:
        started: list[threading.Thread] = []
        try:
            for _ in range(min(WORKERS, len(self.order)) - 1):
                thread = threading.Thread(target=self.work, name="archgap-inflate", daemon=True)
                try:
                    thread.start()
                except RuntimeError:  # no thread to be had: fewer threads do the work
                    break
                started.append(thread)
            self.work()
        finally:
            with self.lock:
                self.stop = True  # (an interrupt) the others finish the member in hand
                self.lock.notify_all()
            for thread in started:
                thread.join()

    def work(self) -> None:
        while True:
            with self.lock:
                taken = self._take()
                if taken is None:
                    return
                k, cost = taken
                raw: bytes | Exception
                try:
                    raw = raw_member(self.fp, self.members[k][0])
                except Exception as exc:  # an OSError of a ranged read too: this member only
                    raw = exc
            try:
                info, path = self.members[k]
                self.results[k] = read_raw(info, path, raw, self.deep)
            finally:
                with self.lock:
                    self.held -= cost
                    self.lock.notify_all()

    def _take(self) -> tuple[int, int] | None:
        """The next member's index and cost, once the budget allows it; None when done."""
        while not self.stop and self.taken < len(self.order):
            k = self.order[self.taken]
            info = self.members[k][0]
            cost = info.compress_size + 2 * info.file_size
            if self.held and self.held + cost > self.budget:
                self.lock.wait()
                continue
            self.taken += 1
            self.held += cost
            return k, cost
        return None


def raw_member(fp: IO[bytes], info: zipfile.ZipInfo) -> bytes:
    """A member's compressed bytes, after its local header is checked as ``zipfile`` checks it."""
    _local_header(fp, info)
    data = _read_exactly(fp, info.compress_size)
    if len(data) != info.compress_size:
        raise EOFError(
            f"truncated: {len(data)} of its {info.compress_size} compressed bytes are there"
        )
    return data


def _local_header(fp: IO[bytes], info: zipfile.ZipInfo) -> int:
    """Checks a member's local header as ``zipfile`` does; returns where its data starts (the
    file is left there)."""
    fp.seek(info.header_offset)
    header = _read_exactly(fp, LOCAL_HEADER.size)
    magic, name_length, extra_length = LOCAL_HEADER.unpack(header.ljust(LOCAL_HEADER.size))
    if magic != LOCAL_MAGIC:
        raise zipfile.BadZipFile("Bad magic number for file header")
    name = _read_exactly(fp, name_length)
    encoding = "utf-8" if info.flag_bits & 0x800 else "cp437"
    if name.decode(encoding, "replace") != info.orig_filename:
        raise zipfile.BadZipFile(
            f"File name in directory {info.orig_filename!r} and header {name!r} differ."
        )
    return fp.seek(extra_length, os.SEEK_CUR)


class MemberStream:
    """A member's bytes as they inflate from its compressed bytes, read in pieces (``read``),
    for members too large for ``read_members``: the same inflater, and the same checks as
    ``zipfile``'s stream (local header; CRC-32 once the stream is read to its end; the size is
    the reader's to check). Only where ``direct`` says the member can be read so."""

    def __init__(self, fp: IO[bytes], info: zipfile.ZipInfo) -> None:
        self.fp, self.info = fp, info
        self.at = _local_header(fp, info)
        self.left = info.compress_size
        deflated = info.compress_type == zipfile.ZIP_DEFLATED
        self.inflater = INFLATER.decompressobj(-15) if deflated else None
        self.tail = b""  # compressed bytes read but not yet inflated (over ``read``'s size)
        self.crc = 0

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all that is left when negative); b"" at the end, where the
        CRC-32 is checked."""
        size = size if size > 0 else max(self.info.file_size, 1)
        while True:
            if not self.tail and self.left:
                self.fp.seek(self.at)
                self.tail = self.fp.read(min(self.left, STREAM_CHUNK))
                if not self.tail:
                    raise EOFError(f"truncated: {self.left} compressed bytes are missing")
                self.at += len(self.tail)
                self.left -= len(self.tail)
            if self.inflater is None:
                data, self.tail = self.tail[:size], self.tail[size:]
            elif self.inflater.eof:  # what follows the deflate stream is not the member's
                data, self.tail, self.left = b"", b"", 0
            else:  # (output the inflater holds back comes with no more input)
                data = self.inflater.decompress(self.tail, size)
                self.tail = self.inflater.unconsumed_tail
            if data:
                self.crc = INFLATER.crc32(data, self.crc)
                return data
            if not self.tail and not self.left:
                if self.crc != self.info.CRC:
                    raise zipfile.BadZipFile(f"Bad CRC-32 for file {self.info.filename!r}")
                return b""

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _read_exactly(fp: IO[bytes], size: int) -> bytes:
    """``size`` bytes, or fewer at the end of the file (a ranged reader returns short reads)."""
    data = fp.read(size)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = fp.read(size - got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def read_raw(info: zipfile.ZipInfo, path: str, raw: bytes | Exception, deep: bool) -> BinaryFacts:
    """One member from its compressed bytes (or the error that reading them gave): inflated,
    checked, and read like an installed file. A member whose first bytes are not a native
    file's is "other", as when the stream is read (only its first 8 bytes count then)."""
    size = info.file_size
    try:
        if isinstance(raw, Exception):
            raise raw
        data = inflate(info, raw)
    except Exception as exc:
        head = None if isinstance(raw, Exception) else _head(info, raw)
        if head is not None and not native_head(head):
            return BinaryFacts(path, size, "other", (), deep)
        return BinaryFacts(path, size, "unreadable", (), deep, f"corrupt member: {exc}")
    if not native_head(data[:4]):
        return BinaryFacts(path, size, "other", (), deep)
    return read_bytes(path, data, deep)


def native_head(head: bytes) -> bool:
    """Whether a member's first 4 bytes are those of a file the kernel reader reads."""
    return head[:4] in NATIVE_MAGIC or head[:2] == PE_MAGIC


def inflate(info: zipfile.ZipInfo, raw: bytes) -> bytes:
    """The member's bytes, at most its size plus one inflated (a zip bomb stops there), their
    size and CRC-32 checked against the central directory."""
    if info.compress_type == zipfile.ZIP_STORED:
        data = raw
    else:
        data = INFLATER.decompressobj(-15).decompress(raw, info.file_size + 1)
    if len(data) != info.file_size:
        raise ValueError(f"member is not the {info.file_size} bytes its header says")
    if INFLATER.crc32(data) != info.CRC:
        raise zipfile.BadZipFile(f"Bad CRC-32 for file {info.filename!r}")
    return data


def _head(info: zipfile.ZipInfo, raw: bytes) -> bytes | None:
    """The first 4 bytes of a member that could not be read whole, or None if even they
    cannot be inflated."""
    if info.compress_type == zipfile.ZIP_STORED:
        return raw[:4] if len(raw) >= 4 else None
    try:
        head = zlib.decompressobj(-15).decompress(raw, 8)
    except zlib.error:
        return None
    return head[:4] if len(head) >= min(8, info.file_size) else None


__all__ = [
    "DIRECT_MAX",
    "INFLATER",
    "WORKERS",
    "MemberStream",
    "direct",
    "inflate",
    "native_head",
    "raw_member",
    "read_members",
]
