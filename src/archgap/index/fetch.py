"""Wheels from a URL, read without downloading more than needed.

Where the server answers range requests (``206 Partial Content``), a wheel is a ``RangedFile``:
``zipfile`` seeks to the central directory at its end and then to the native members, and only
those byte ranges cross the network (with read-ahead, so a member is a few large requests); the
index's sha256 cannot be checked then, and the result says so (``Fetched.verified``). A server
whose 206 answers are short of what was asked is not read a piece at a time: the wheel is
downloaded instead. Where ranges are not served, the wheel is downloaded once, in one streaming
pass (capped at ``Session.max_download`` bytes), into the user's cache directory
(``$XDG_CACHE_HOME/archgap/wheels``), named by a hash of its (redacted) URL and checked against
the index's sha256 when the index gives one; a later run reads the cached copy.

A download in progress is ``NAME.PID-XXXX.part`` beside its target: removed when it fails, when
the process gets SIGTERM, and by a later run once process PID is gone (``sweep_partials``).
Requests go through ``net`` (deadline, caps, credentials, redaction).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import http.client
import io
import os
import re
import signal
import stat
import tempfile
import urllib.parse
import urllib.request
from dataclasses import dataclass
from types import FrameType
from typing import IO, Any

from archgap.index import net
from archgap.probe.environment.envvars import hide_url_password

READ_AHEAD = 1 << 20  # bytes fetched at least per range request
MIN_RANGE = 64 << 10  # a 206 answer shorter than this (and than asked) is a short answer
CHUNK = 1 << 20


class FetchError(Exception):
    """A URL could not be read; the message says why (status, network error)."""


class ShortRange(OSError):
    """A 206 answer with fewer bytes than asked: the wheel is downloaded whole instead."""


@dataclass
class Fetched:
    """How a wheel was read: through ranges (bytes fetched of its size) or a whole download;
    ``verified``: its bytes were checked against the index's sha256."""

    url: str
    size: int
    ranged: bool
    cached: str | None = None  # the cache file, when the wheel was downloaded whole
    bytes_fetched: int = 0
    sha256: str | None = None  # what the index gave
    verified: bool = False  # the bytes were checked against it
    short_range: bool = False  # the server sent a short 206 answer: download it whole


class RangedFile(io.RawIOBase):
    """A read-only, seekable file over HTTP range requests (what ``zipfile`` needs)."""

    def __init__(self, url: str, size: int, fetched: Fetched) -> None:
        super().__init__()
        self.url, self.size, self.fetched = url, size, fetched
        self.pos = 0
        self.window_start, self.window = 0, b""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            n = self.size - self.pos
        n = min(n, self.size - self.pos)
        if n <= 0:
            return b""
        start = self.pos - self.window_start
        if not 0 <= start < len(self.window):  # a short read is fine: BufferedReader reads on
            self._fill(n)
            start = 0
        data = self.window[start : start + n]
        self.pos += len(data)
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def _fill(self, n: int) -> None:
        end = min(self.size, self.pos + max(n, READ_AHEAD)) - 1
        wanted = end - self.pos + 1
        try:
            with net.open_url(self.url, {"Range": f"bytes={self.pos}-{end}"}) as answer:
                if answer.status != 206:
                    raise OSError(f"{self.url}: HTTP {answer.status} to a range request")
                sent = _content_range(answer.headers.get("Content-Range"))
                if sent is None or sent[0] != self.pos or not self._useful(sent[1], end):
                    self.fetched.short_range = True
                    raise ShortRange(f"{self.url}: bytes {sent} for the range {self.pos}-{end}")
                data = net.read_capped(answer, wanted, self.url)
        except net.NetError as exc:
            raise OSError(str(exc)) from None
        self.fetched.bytes_fetched += len(data)
        self.window_start, self.window = self.pos, data

    def _useful(self, last: int, end: int) -> bool:
        """A range that ends where asked, or at least ``MIN_RANGE`` on, never past it."""
        return last <= end and last - self.pos + 1 >= min(end - self.pos + 1, MIN_RANGE)


def _content_range(header: str | None) -> tuple[int, int] | None:
    """(first, last) byte of a ``Content-Range: bytes A-B/N`` answer."""
    found = re.fullmatch(r"\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*", header or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


def cache_dir(kind: str = "wheels") -> str:
    """``$XDG_CACHE_HOME/archgap/KIND`` (wheels by URL; image blobs by digest)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "archgap", kind)


def cache_path(url: str, sha256: str | None) -> str:
    """The cache file of a URL: a hash of the redacted URL (and of the index's sha256), then
    its name (never a credential: ``url`` is redacted first)."""
    shown = hide_url_password(url)
    key = hashlib.sha256(f"{shown}\0{sha256 or ''}".encode()).hexdigest()[:24]
    name = os.path.basename(urllib.parse.urlsplit(shown).path) or "download"
    return os.path.join(cache_dir(), f"{key}-{name}")


# -- partial files ----------------------------------------------------------------------------

_PARTIAL = re.compile(r"\.(\d+)-[A-Za-z0-9_]+\.part$")
_IN_FLIGHT: set[str] = set()
_PREVIOUS: list[Any] = []  # the SIGTERM handler ours replaced, while one is installed


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    """Remove the downloads in progress, then let SIGTERM do what it did before."""
    for path in list(_IN_FLIGHT):
        with contextlib.suppress(OSError):
            os.unlink(path)
    previous = _PREVIOUS[0] if _PREVIOUS else signal.SIG_DFL
    signal.signal(signal.SIGTERM, previous)
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        os.kill(os.getpid(), signal.SIGTERM)  # the default action: ended by the signal (143)


def sweep_partials(directory: str) -> None:
    """Remove the partial files of processes that are gone (killed before they could)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        found = _PARTIAL.search(name)
        if found and not _alive(int(found.group(1))):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, name))


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM  # someone else's process
    return True


class PartialFile:
    """A new ``TARGET.PID-XXXX.part`` beside ``target`` (earlier runs' leftovers swept first):
    ``commit`` renames it over ``target``; anything else (``discard``, an exception in a
    ``with``, SIGTERM) removes it. Raises ``OSError`` when it cannot be created."""

    def __init__(self, target: str) -> None:
        self.target = target
        directory = os.path.dirname(target)
        os.makedirs(directory, exist_ok=True)
        sweep_partials(directory)
        prefix = f"{os.path.basename(target)}.{os.getpid()}-"
        fd, self.path = tempfile.mkstemp(dir=directory, prefix=prefix, suffix=".part")
        self.out: IO[bytes] | None = os.fdopen(fd, "wb")
        if not _IN_FLIGHT:
            _install_sigterm()
        _IN_FLIGHT.add(self.path)

    def write(self, data: bytes) -> None:
        assert self.out is not None
        self.out.write(data)

    def commit(self) -> None:
        assert self.out is not None
        self.out.close()
        os.replace(self.path, self.target)
        self._done()

    def discard(self) -> None:
        if self.out is not None:
            self.out.close()
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            self._done()

    def _done(self) -> None:
        self.out = None
        _IN_FLIGHT.discard(self.path)
        if not _IN_FLIGHT and _PREVIOUS:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, _PREVIOUS.pop())

    def __enter__(self) -> PartialFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()


def _install_sigterm() -> None:
    """Our SIGTERM handler while partial files are open (main thread only)."""
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: its owner handles signals
        return
    _PREVIOUS.append(previous)


# -- opening ----------------------------------------------------------------------------------


def open_local(path: str) -> IO[bytes]:
    """A local file, opened without blocking (a FIFO does not hang) and only if it is a
    regular file; raises ``FetchError``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise FetchError(f"{path}: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise FetchError(f"{path}: {_file_kind(mode)}, not a regular file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
             (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"))  # fmt: skip
    return next((name for test, name in kinds if test(mode)), "a special file")


def open_wheel(
    url: str, sha256: str | None = None, whole: bool = False
) -> tuple[IO[bytes], Fetched]:
    """A seekable file of the wheel at ``url``: local for file: URLs, ranged where the server
    supports it (unless ``whole``), else a download into the cache. Raises ``FetchError``."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "file":
        path = urllib.request.url2pathname(parts.path)
        try:
            handle = open_local(path)
        except FetchError as exc:
            raise FetchError(f"{url}: {str(exc).removeprefix(path + ': ')}") from None
        size = os.fstat(handle.fileno()).st_size
        if sha256:  # a local index's file: checked here, it costs a read of the disk
            hasher = hashlib.sha256()
            while block := handle.read(CHUNK):
                hasher.update(block)
            digest = hasher.hexdigest()
            handle.seek(0)
            if digest != sha256.lower():
                handle.close()
                raise FetchError(f"{url}: sha256 {digest} is not the index's {sha256}")
        return handle, Fetched(url, size, False, path, 0, sha256, bool(sha256))
    cached = cache_path(url, sha256)
    if os.path.isfile(cached):  # downloaded (and checked) before: no network at all
        handle = open(cached, "rb")  # noqa: SIM115 (closed by the caller)
        size = os.fstat(handle.fileno()).st_size
        return handle, Fetched(url, size, False, cached, 0, sha256, bool(sha256))
    total = None if whole else _ranged_size(url)
    if total is not None:
        fetched = Fetched(url, total, True, sha256=sha256)
        return io.BufferedReader(RangedFile(url, total, fetched), 64 << 10), fetched
    return _download(url, sha256)


def _ranged_size(url: str) -> int | None:
    """The wheel's size if the server answers a one-byte range request with 206, else None."""
    try:
        with net.open_url(url, {"Range": "bytes=0-0"}) as answer:
            if answer.status != 206:
                return None
            total = (answer.headers.get("Content-Range") or "").rpartition("/")[2]
            return int(total) if total.isdigit() else None
    except net.NetError as exc:
        raise FetchError(str(exc)) from None


def _download(url: str, sha256: str | None) -> tuple[IO[bytes], Fetched]:
    """The whole wheel, once, into the cache (atomically; capped; checked against ``sha256``)."""
    target, shown = cache_path(url, sha256), hide_url_password(url)
    cap = net.session().max_download
    digest = hashlib.sha256()
    size = 0
    try:
        with PartialFile(target) as out, net.open_url(url) as answer:
            net.check_length(answer, cap, url)
            while chunk := answer.read1(CHUNK):
                size += len(chunk)
                if size > cap:
                    raise FetchError(f"{shown}: more than {cap:,} bytes, over the cap")
                digest.update(chunk)
                out.write(chunk)
            if answer.length:  # read1 ends quietly where the connection closed early
                short = f"the connection closed {answer.length:,} bytes before the end"
                raise FetchError(f"{shown}: {short}")
            got = digest.hexdigest()
            if sha256 and got != sha256.lower():
                raise FetchError(f"{shown}: sha256 {got} is not the index's {sha256}")
            out.commit()
    except (OSError, http.client.HTTPException) as exc:
        raise FetchError(net.describe(url, exc)) from None
    handle = open(target, "rb")  # noqa: SIM115 (closed by the caller)
    return handle, Fetched(url, size, False, target, size, sha256, bool(sha256))
