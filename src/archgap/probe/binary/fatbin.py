"""Device code inside binaries: ELF section headers and fatbin headers, read through mmap.

What is read (formats measured against cuobjdump 13.5: docs/reference/fatbin-format.md):

- ELF shared libraries, executables and objects: the ``.nv_fatbin`` section holds one or more
  fatbin containers back to back; ``__nv_relfatbin`` holds the relocatable (``-rdc``) fatbins of an
  object file (``hostelf``). Static archives (``ar``) are read member by member (``ar``).
- Loose ``.cubin`` files (an ELF image with e_machine 190, ``elf``) and ``.fatbin`` files
  (containers, ``fatcontainer``).
- ``deep=True`` also searches the data sections (``.cask_resource``, ``.ldata``, ``.rodata``,
  ``.data`` ...) for containers and bare cubins that libraries load themselves and cuobjdump never
  lists (``deepsearch``). Every candidate header is validated before it counts, so a stray magic
  number is no hit.

Only headers are touched (the ELF header, the section header table, 16 bytes per container and
64 per entry); nothing is decompressed. Nothing here raises to the caller: an unreadable,
truncated or corrupt file becomes a ``BinaryFacts`` with ``error`` set, keeping what was found
before the damage. Which files a directory walk reads: ``binfiles``.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import mmap
import os
import select
import stat
import struct
from typing import TYPE_CHECKING, Any, Callable, Iterator, List, Optional, Tuple, Union

from ..forked import Send, fork_safe, in_two_processes
from .ar import AR_MAGIC, THIN_AR_MAGIC, read_archive
from .binreader import NotRecorded, Reader, WorkBoundReached
from .elf import ELF_MAGIC, cubin_at
from .facts import BinaryFacts, BinaryFormat
from .fatcontainer import CONTAINER_MAGIC, walk_containers
from .hostelf import read_elf
from .pe import MZ_MAGIC, read_pe

if TYPE_CHECKING:
    from .summary import Summary

# Where each file's entries are merged as they are found (``functools.partial(Summary, limit)``,
# a new one per file): one row per kind of entry. None: every entry is kept.
Summarize = Optional[Callable[[], "Summary"]]


def open_error(path: str, exc: OSError) -> str:
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


def read_binary(path: str, deep: bool = False, summarize: Summarize = None) -> BinaryFacts:
    """The device code in one file. Never raises: problems are in ``error``."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (no effect on regular files)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        return BinaryFacts(path, 0, "unreadable", (), deep, open_error(path, exc))
    try:
        return read_open_file(path, fd, deep, summarize)
    finally:
        os.close(fd)


def read_open_file(
    path: str, fd: int, deep: bool = False, summarize: Summarize = None
) -> BinaryFacts:
    """The device code in the file open as ``fd`` (an archive's member spilled to an unnamed
    temporary file), named ``path`` in the result. Never raises."""
    try:
        return _read_open_file(path, fd, deep, summarize)
    except Exception as exc:  # a reader bug or an odd file must not end a scan
        return BinaryFacts(path, 0, "unreadable", (), deep, "%s: %s" % (type(exc).__name__, exc))


def read_cubin_at(path: str, offset: int) -> BinaryFacts:
    """A cubin stored at ``offset`` of a file (CuPy's kernel cache puts an md5 digest first).
    Never raises: problems are in ``error``."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        return BinaryFacts(path, 0, "unreadable", (), False, open_error(path, exc))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size <= offset:
            return BinaryFacts(path, info.st_size, "other", (), False, "no cubin at %d" % offset)
        with contextlib.closing(mmap.mmap(fd, info.st_size, access=mmap.ACCESS_READ)) as buf:
            reader = Reader(buf, info.st_size, False)
            cubin_at(reader, offset, info.st_size, "", True, None, loose=True)
            entries, error = reader.found_entries(), reader.error_text()
        return BinaryFacts(path, info.st_size, "cubin", entries, False, error)
    except Exception as exc:  # a reader bug or an odd file must not end a scan
        return BinaryFacts(path, 0, "unreadable", (), False, "%s: %s" % (type(exc).__name__, exc))
    finally:
        os.close(fd)


def _read_open_file(path: str, fd: int, deep: bool, summarize: Summarize) -> BinaryFacts:
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        return BinaryFacts(path, 0, "unreadable", (), deep, "is a directory")
    if not stat.S_ISREG(info.st_mode):
        return BinaryFacts(path, 0, "other", (), deep, "not a regular file")
    size = info.st_size
    try:
        head = os.pread(fd, 8, 0)
    except OSError as exc:
        return BinaryFacts(path, size, "unreadable", (), deep, open_error(path, exc))
    kind = kind_of(head)
    unread = not_read(path, size, kind, deep)
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
        return _read_buffer(path, buf, size, kind, deep, fd, summarize)
    finally:
        buf.close()


def kind_of(head: bytes) -> str:
    """What the first 8 bytes say a file is: elf, pe (a Windows image), archive, fatbin, thin
    (archive) or other."""
    if head[:4] == ELF_MAGIC:
        return "elf"
    if head[:2] == MZ_MAGIC:
        return "pe"
    if head == AR_MAGIC:
        return "archive"
    if head[:4] == CONTAINER_MAGIC:
        return "fatbin"
    return "thin" if head == THIN_AR_MAGIC else "other"


def not_read(path: str, size: int, kind: str, deep: bool) -> Optional[BinaryFacts]:
    """The row of a file whose first bytes say there is nothing here to read, else None."""
    if kind == "thin":
        return BinaryFacts(
            path, size, "archive", (), deep, "thin archive: its members are separate files"
        )
    return BinaryFacts(path, size, "other", (), deep) if kind == "other" else None


def _read_buffer(
    path: str, buf: Any, size: int, kind: str, deep: bool, fd: int, summarize: Summarize = None
) -> BinaryFacts:
    """The device code in ``buf`` (an mmap of a file, or a member's bytes), known to be ``kind``."""
    summary = summarize() if summarize is not None else None
    return read_with(path, Reader(buf, size, deep, fd, summary), kind)


def read_with(path: str, reader: Reader, kind: str) -> BinaryFacts:
    """The device code ``reader`` finds in a file known to be ``kind`` (elf, pe, archive, fatbin):
    an mmap, a member's bytes, or the headers a stream kept (``archives.streamread``)."""
    size = reader.size
    found: BinaryFormat = "archive" if kind == "archive" else "fatbin"
    try:
        if kind == "elf":
            found = read_elf(reader, 0, size, None)
        elif kind == "pe":
            found = read_pe(reader)
        elif kind == "archive":
            read_archive(reader)
        else:
            walk_containers(reader, 0, size, "", True, None)
    except (WorkBoundReached, NotRecorded) as exc:
        reader.errors.insert(0, str(exc))
        reader.error_count += 1
        found = "unknown"
    return BinaryFacts(
        path, size, found, reader.found_entries(), reader.deep, reader.error_text(), reader.machine,
        reader.needed, reader.runpath, tuple(sorted(reader.toolkits, key=_release_key)),
        reader.dlopens, reader.compilers, reader.cuda_release, reader.loader_imports,
        reader.loader_names,
    )  # fmt: skip


def _release_key(release: str) -> Tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


def read_bytes(path: str, data: Union[bytes, bytearray], deep: bool = False) -> BinaryFacts:
    """The device code in a file's bytes that are not a file here (a wheel's or a conda
    package's member, decompressed): the same reader and validation as ``read_binary``.
    ``path`` names it in the result. Never raises: problems are in ``error``."""
    size = len(data)
    kind = kind_of(bytes(data[:8]))
    unread = not_read(path, size, kind, deep)
    if unread is not None:
        return unread
    try:
        return _read_buffer(path, data, size, kind, deep, -1)
    except Exception as exc:  # a reader bug or an odd member must not end a scan
        return BinaryFacts(path, 0, "unreadable", (), deep, "%s: %s" % (type(exc).__name__, exc))


# -- reading many files: shared with one helper process ----------------------------------------

# Below this many bytes of files a second process does not win back its start and transfer.
# Measured on 2 idle CPUs, torch 2.14.1+cu130's site-packages (5 GB): `scan` 2.86 -> 1.75 s
# wall with the helper (its strings pass: ~0.9 GB of read-only data searched), `kernels`
# 0.52 -> 0.45 s (medians of 5 and 7 runs, the same commit with and without it).
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
    paths: List[str],
    deep: bool = False,
    progress: Optional[Progress] = None,
    summarize: Summarize = None,
    read: Optional[Callable[[str], BinaryFacts]] = None,
) -> List[BinaryFacts]:
    """``read_binary`` over ``paths`` (with ``summarize``), or ``read``, a reader of one path
    that may read deeply; the results are in the order of ``paths``. A helper sends back what it
    read: summaries pickle in a fraction of the time of every entry.

    When the files hold at least ``HELPER_MIN_BYTES`` and a CPU is idle, a forked helper
    process reads some of the files (POSIX only, and only from a process without other
    threads: forking one with threads can deadlock the child). The results are the ones one
    process gives, in the same order; whatever goes wrong with the helper only means this
    process reads its files."""
    if read is None:
        read = functools.partial(read_binary, deep=deep, summarize=summarize)
    results: List[Optional[BinaryFacts]] = [None] * len(paths)
    tally = _Tally(len(paths), progress)
    if len(paths) > 1 and _helper_allowed():
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
                _read_shared(paths, order[at : at + per_round], read, results, tally)
    for i, facts in enumerate(results):
        if facts is None:
            results[i] = read(paths[i])
            tally(paths[i])
    return [facts for facts in results if facts is not None]


def _helper_allowed() -> bool:
    if not fork_safe():
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
    read: Callable[[str], BinaryFacts],
    results: List[Optional[BinaryFacts]],
    tally: Callable[[str], None] = lambda _path: None,
) -> None:
    """Read ``paths[i]`` for ``i`` in ``indices`` in this process and one forked helper, each
    taking the next index from a pipe; fills ``results``. Files the helper took but did not
    return stay None (the caller reads them)."""
    import pickle  # here: only a read of many files comes here

    try:
        queue_r, queue_w = os.pipe()
    except OSError:
        return
    try:
        os.write(queue_w, b"".join(QUEUE_RECORD.pack(i) for i in indices))
        os.close(queue_w)
        queue_w = -1  # closed everywhere before the fork: an empty queue then reads as EOF

        def helper(_send: Send) -> bytes:
            done = [(i, read(paths[i])) for i in _take(queue_r)]
            return pickle.dumps(done, pickle.HIGHEST_PROTOCOL)

        def here() -> None:
            for i in _take(queue_r):
                results[i] = read(paths[i])
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


__all__ = [
    "Progress",
    "Summarize",
    "kind_of",
    "not_read",
    "open_error",
    "read_binaries",
    "read_binary",
    "read_bytes",
    "read_cubin_at",
    "read_open_file",
    "read_with",
]
