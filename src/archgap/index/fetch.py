"""Wheels from a URL, read without downloading more than needed.

Where the server answers range requests (``206 Partial Content``), a wheel is a ``RangedFile``:
``zipfile`` seeks to the central directory at its end and then to the native members, and only
those byte ranges cross the network (with read-ahead, so a member is a few large requests). Where
it does not, the wheel is downloaded once, in one streaming pass, into the user's cache directory
(``$XDG_CACHE_HOME/archgap/wheels``), named by a hash of its URL and checked against the index's
sha256 when the index gives one; a later run reads the cached copy.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import IO

READ_AHEAD = 1 << 20  # bytes fetched at least per range request
TIMEOUT = 60.0
USER_AGENT = "archgap (wheel reader; https://github.com/archgap)"


class FetchError(Exception):
    """A URL could not be read; the message says why (status, network error)."""


@dataclass
class Fetched:
    """How a wheel was read: through ranges (bytes fetched of its size) or a whole download."""

    url: str
    size: int
    ranged: bool
    cached: str | None = None  # the cache file, when the wheel was downloaded whole
    bytes_fetched: int = 0


def request(url: str, headers: dict[str, str] | None = None) -> urllib.request.Request:
    return urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **(headers or {})})


def describe(url: str, exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"{url}: HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return f"{url}: {exc.reason}"
    return f"{url}: {type(exc).__name__}: {exc}"


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
        headers = {"Range": f"bytes={self.pos}-{end}"}
        try:
            with urllib.request.urlopen(request(self.url, headers), timeout=TIMEOUT) as answer:
                if answer.status != 206:
                    raise OSError(f"{self.url}: HTTP {answer.status} to a range request")
                data = answer.read(end - self.pos + 1)
        except (urllib.error.URLError, OSError) as exc:
            raise OSError(describe(self.url, exc)) from None
        self.fetched.bytes_fetched += len(data)
        self.window_start, self.window = self.pos, data


def cache_dir(kind: str = "wheels") -> str:
    """``$XDG_CACHE_HOME/archgap/KIND`` (wheels by URL; image blobs by digest)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "archgap", kind)


def cache_path(url: str, sha256: str | None) -> str:
    """The cache file of a URL: a hash of the URL (and of the index's sha256), then its name."""
    key = hashlib.sha256(f"{url}\0{sha256 or ''}".encode()).hexdigest()[:24]
    name = os.path.basename(urllib.parse.urlsplit(url).path) or "download"
    return os.path.join(cache_dir(), f"{key}-{name}")


def open_wheel(url: str, sha256: str | None = None) -> tuple[IO[bytes], Fetched]:
    """A seekable file of the wheel at ``url``: local for file: URLs, ranged where the server
    supports it, else a download into the cache. Raises ``FetchError``."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "file":
        path = urllib.request.url2pathname(parts.path)
        try:
            handle = open(path, "rb")  # noqa: SIM115 (closed by the caller)
        except OSError as exc:
            raise FetchError(f"{url}: {exc.strerror or exc}") from None
        size = os.fstat(handle.fileno()).st_size
        return handle, Fetched(url, size, False, path)
    cached = cache_path(url, sha256)
    if os.path.isfile(cached):  # downloaded before: no network at all
        handle = open(cached, "rb")  # noqa: SIM115 (closed by the caller)
        return handle, Fetched(url, os.fstat(handle.fileno()).st_size, False, cached, 0)
    total = _ranged_size(url)
    if total is not None:
        fetched = Fetched(url, total, True)
        return io.BufferedReader(RangedFile(url, total, fetched), 64 << 10), fetched
    return _download(url, sha256)


def _ranged_size(url: str) -> int | None:
    """The wheel's size if the server answers a one-byte range request with 206, else None."""
    try:
        with urllib.request.urlopen(
            request(url, {"Range": "bytes=0-0"}), timeout=TIMEOUT
        ) as answer:
            if answer.status != 206:
                return None
            total = (answer.headers.get("Content-Range") or "").rpartition("/")[2]
            return int(total) if total.isdigit() else None
    except urllib.error.HTTPError as exc:
        raise FetchError(describe(url, exc)) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise FetchError(describe(url, exc)) from None


def _download(url: str, sha256: str | None) -> tuple[IO[bytes], Fetched]:
    """The whole wheel, once, into the cache (atomically; checked against ``sha256``)."""
    target = cache_path(url, sha256)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    digest = hashlib.sha256()
    fd, partial = tempfile.mkstemp(dir=os.path.dirname(target), suffix=".part")
    size = 0
    try:
        with (
            os.fdopen(fd, "wb") as out,
            urllib.request.urlopen(request(url), timeout=TIMEOUT) as answer,
        ):
            while chunk := answer.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
                size += len(chunk)
        if sha256 and digest.hexdigest() != sha256.lower():
            raise FetchError(f"{url}: sha256 {digest.hexdigest()} is not the index's {sha256}")
        os.replace(partial, target)
    except (urllib.error.URLError, OSError) as exc:
        raise FetchError(describe(url, exc)) from None
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    handle = open(target, "rb")  # noqa: SIM115 (closed by the caller)
    return handle, Fetched(url, size, False, target, size)
