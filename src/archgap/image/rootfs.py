"""An unpacked root file system (``rootfs:DIR``, or a directory with an os-release file): the
same reading as an image's layers, over files on disk.

The directory is walked without following symlinks (``lstat``), into the same tree as layers
give; symlinks are then resolved inside that tree, as the image would see them, never on this
machine (an absolute link ``/usr/lib/x`` means ``DIR/usr/lib/x``). A file is opened one path
component at a time below DIR with ``O_NOFOLLOW``, so a link swapped in meanwhile is not
followed either. Nothing is written.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from typing import IO, Any

from archgap.image.facts import ImageFacts
from archgap.image.layers import DIR, FILE, OTHER, SYMLINK, Entry, FileTree
from archgap.image.read import Fetched, ImageContents, read_tree
from archgap.image.sites import find_sites
from archgap.probe.facts import Problem

SKIPPED = frozenset(("/proc", "/sys", "/dev", "/run", "/tmp"))  # nothing of Python lives there
MAX_ENTRIES = 4_000_000
_NOFOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def read_rootfs(directory: str, deep: bool = True) -> ImageContents:
    """The Python distributions and native files of the root file system at ``directory``.
    Never raises."""
    label = directory.rstrip("/") or "/"
    found = ImageContents(label)
    if not os.path.isdir(directory):
        found.problems.append(Problem(label, "not a directory"))
        return found
    tree = FileTree()
    try:
        _walk(directory, tree)
    except OSError as exc:
        found.problems.append(Problem(label, f"cannot walk: {exc.strerror or exc}"))
        return found
    problems: list[str] = []
    sites = find_sites(tree, problems)
    found.problems.extend(Problem(label, p) for p in problems)
    found.image = ImageFacts(label, "", "", "", None, "", 0, sites)

    def fetch(wanted: dict[str, Entry], read: Callable[[str, IO[bytes], int], Any]) -> Fetched:
        return _fetch(directory, wanted, read)

    read_tree(found, tree, fetch, sites, deep)
    return found


def _walk(root: str, tree: FileTree) -> None:
    for count, (path, info) in enumerate(_entries(root, "/"), 1):
        if count > MAX_ENTRIES:
            raise OSError(f"more than {MAX_ENTRIES} entries")
        tree.add(path, _entry(root, path, info))


def _entries(root: str, start: str) -> Iterator[tuple[str, os.stat_result]]:
    """(image path, lstat) of everything under ``start``, without following symlinks."""
    stack = [start]
    while stack:
        current = stack.pop()
        try:
            items = sorted(os.scandir(root + current), key=lambda e: e.name)
        except OSError:
            continue  # unreadable directory: its contents are not part of the tree
        for item in items:
            path = current.rstrip("/") + "/" + item.name
            if path in SKIPPED:
                continue
            info = item.stat(follow_symlinks=False)
            yield path, info
            if stat.S_ISDIR(info.st_mode):
                stack.append(path)


def _entry(root: str, path: str, info: os.stat_result) -> Entry:
    if stat.S_ISREG(info.st_mode):
        return Entry(0, FILE, info.st_size)
    if stat.S_ISDIR(info.st_mode):
        return Entry(0, DIR, 0)
    if stat.S_ISLNK(info.st_mode):
        try:
            return Entry(0, SYMLINK, 0, os.readlink(root + path))
        except OSError:
            return Entry(0, OTHER, 0)
    return Entry(0, OTHER, 0)


@contextlib.contextmanager
def open_beneath(root: str, path: str) -> Iterator[IO[bytes]]:
    """The regular file ``root + path``, opened one component at a time with O_NOFOLLOW."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in [p for p in path.split("/") if p]:
            next_fd = os.open(part, _NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        yield handle


def _fetch(
    root: str, wanted: dict[str, Entry], read: Callable[[str, IO[bytes], int], Any]
) -> Fetched:
    results: dict[str, Any] = {}
    failed: dict[str, str] = {}
    for path in sorted(wanted):
        try:
            with open_beneath(root, path) as handle:
                results[path] = read(path, handle, os.fstat(handle.fileno()).st_size)
        except OSError as exc:
            failed[path] = f"cannot read: {exc.strerror or exc}"
    return results, failed
