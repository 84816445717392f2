"""One archive read: a local wheel or conda package, one at a URL, or the wheel an index lists (its
WHEEL file checked against its name). ``archgap.targets`` tells which a target names."""

from __future__ import annotations

import contextlib
import urllib.parse
import zipfile
from typing import IO

from archgap.archives.wheel import WheelContents, read_wheel
from archgap.index.conda import conda_format, read_conda
from archgap.index.fetch import Fetched, FetchError, open_local, open_wheel
from archgap.index.resolve import IndexFile
from archgap.index.wheeltags import tag_problems
from archgap.probe.facts import Problem


def failed(target: str, reason: str) -> WheelContents:
    """A target that could not be read: contents with only its problem."""
    contents = WheelContents(target)
    contents.problems.append(Problem(target, reason))
    return contents


def read_url(url: str, sha256: str | None, fetched: list[Fetched], deep: bool) -> WheelContents:
    """The archive at ``url`` (admitted: redacted), downloaded whole when its server's range
    answers fall short."""
    contents = WheelContents(url)
    for whole in (False, True):
        try:
            handle, how = open_wheel(url, sha256, whole=whole)
        except FetchError as exc:  # the problem's subject is the URL: said once
            return failed(url, str(exc).removeprefix(url + ": "))
        with contextlib.closing(handle):
            contents = _read_handle(url, urllib.parse.urlsplit(url).path, handle, deep)
        fetched.append(how)
        if not how.short_range:
            break
    return contents


def _read_handle(label: str, name: str, handle: IO[bytes], deep: bool) -> WheelContents:
    """A conda package, or a wheel with what its name, WHEEL and native files disagree on
    (``name``: the file's path or URL path, which tells which it is)."""
    if conda_format(name):
        return read_conda(label, handle, deep)
    contents = read_wheel(label, handle, deep)
    if contents.distributions:
        try:
            handle.seek(0)
            with zipfile.ZipFile(handle) as zf:
                contents.problems.extend(tag_problems(contents, zf))
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
            contents.problems.append(Problem(label, f"its WHEEL file cannot be read: {exc}"))
    return contents


def read_local(path: str, deep: bool) -> WheelContents:
    """A local archive, opened only if it is a regular file (a FIFO never hangs the read)."""
    try:
        handle = open_local(path)
    except FetchError as exc:
        return failed(path, str(exc).removeprefix(path + ": "))
    with contextlib.closing(handle):
        return _read_handle(path, path, handle, deep)


def read_index_file(file: IndexFile, fetched: list[Fetched]) -> WheelContents:
    """The wheel an index lists, read (checked against the index's sha256 when downloaded)."""
    return read_url(file.url, file.sha256, fetched, True)
