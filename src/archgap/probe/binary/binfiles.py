"""The binaries under paths: which files a directory walk reads for device code, and the probe
section "binaries".

Which files a directory walk reads (``discover``, under ``walk_binaries``): regular files named
``*.so``, ``*.so.N``, ``*.a``, ``*.o``, ``*.cubin`` or ``*.fatbin``, and executable files whose
first bytes are the ELF magic. Names with a known text/data extension (``.py``, ``.h``,
``.json`` ...) are never looked at further, which keeps a walk over a multi-gigabyte
site-packages at one ``readdir`` per directory: only symlinks and files with other names are
``stat``'ed (for the executable bit), and only executables are opened to check their magic.
Each file is read once (by device and inode), and a symlink loop is a row with its reason.

A walk stays inside the directory it was given: a symlink whose target (every link resolved)
is outside it is never followed nor opened. A directory link out, or a link out with a binary's
name, is a row with its reason ("a link out of the walked tree"); a link out with another name
(a venv's ``bin/python``) is passed over like every file whose name says it is no binary. Links
inside the tree are followed (``libcublas.so -> libcublas.so.12``; a directory once).
"""

from __future__ import annotations

import operator
import os
import stat
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from .deep_plan import read_selectively
from .elf import ELF_MAGIC
from .facts import BinaryFacts
from .fatbin import Progress, Summarize, open_error, read_binaries
from .names import NATIVE_NAME
from .runpath import with_runpaths
from .summary import Summary, binary_json

if TYPE_CHECKING:  # a plain read needs none of what System imports (subprocess, uuid ...)
    from ..environment.system import System

# Files without an extension that are never binaries (wheel metadata, licences).
NOT_BINARY_NAMES = frozenset(
    ("RECORD", "METADATA", "WHEEL", "INSTALLER", "REQUESTED", "LICENSE", "NOTICE", "COPYING",
     "AUTHORS", "README", "Makefile", "BUILD", "CMakeLists")
)  # fmt: skip
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


_NAME = operator.attrgetter("name")
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
            yield path, _row(path, open_error(path, exc))
            continue
        if stat.S_ISDIR(info.st_mode):
            yield from _walk_directory(path, info, seen_files, seen_dirs)
        else:
            key = (info.st_dev, info.st_ino)
            if key not in seen_files:
                seen_files.add(key)
                yield path, None


def _link_out(root: str, path: str) -> Optional[str]:
    """Why the symlink ``path`` is not followed, when its target (all links resolved) is outside
    ``root`` (a resolved directory); None when it stays inside."""
    target = os.path.realpath(path)
    if target == root or target.startswith(root.rstrip(os.sep) + os.sep):
        return None
    try:
        shown = os.readlink(path)
    except OSError:
        shown = target
    return "a link out of the walked tree (-> %s): not followed" % shown[:256]


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


def _worth_a_look(items: List[os.DirEntry]) -> List[os.DirEntry]:  # type: ignore[type-arg]
    """A directory's entries by name, less the files whose extension says text or data (most
    of a site-packages: they are dropped before the sort)."""
    kept = []
    for item in items:
        name = item.name
        dot = name.rfind(".")
        if dot <= 0 or name[dot:].lower() not in TEXT_EXTENSIONS or item.is_dir():
            kept.append(item)
    kept.sort(key=_NAME)
    return kept


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
    root = os.path.realpath(top)
    # Depth first, names sorted; each frame carries the (dev, ino) chain of its ancestors.
    # Entries that are not symlinks take their identity from readdir (parent's device, d_ino):
    # no stat call for the thousands of ordinary files and directories of a site-packages.
    stack: List[Tuple[str, Tuple[Tuple[int, int], ...]]] = [(top, (top_key,))]
    while stack:
        directory, ancestors = stack.pop()
        try:
            with os.scandir(directory) as scan:
                items = list(scan)
        except OSError as exc:
            yield directory, _row(directory, open_error(directory, exc))
            continue
        subdirs: List[Tuple[str, Tuple[Tuple[int, int], ...]]] = []
        for item in _worth_a_look(items):
            yield from _look(item, root, ancestors, seen_files, seen_dirs, subdirs)
        stack.extend(reversed(subdirs))


def _look(
    item: os.DirEntry,  # type: ignore[type-arg]
    root: str,
    ancestors: Tuple[Tuple[int, int], ...],
    seen_files: Set[Tuple[int, int]],
    seen_dirs: Set[Tuple[int, int]],
    subdirs: List[Tuple[str, Tuple[Tuple[int, int], ...]]],
) -> Iterator[Discovered]:
    """What one directory entry yields: a file to read, a problem row, or (a directory) a
    frame added to ``subdirs``."""
    device = ancestors[-1][0]
    candidate = NATIVE_NAME.search(item.name) is not None  # read whatever its mode
    try:
        link = item.is_symlink()
        outside = _link_out(root, item.path) if link else None
        if outside is not None:  # a stat of the target, never an open or a listing
            if candidate or item.is_dir():
                yield item.path, _row(item.path, outside)
            return
        if item.is_dir():
            key = _identity(item, link, device)
            if key in ancestors:
                yield item.path, _row(item.path, "symlink loop (a directory that contains it)")
            elif key not in seen_dirs:
                seen_dirs.add(key)
                subdirs.append((item.path, (*ancestors, key)))
            return
        yield from _file(item, candidate, link, device, seen_files)
    except OSError as exc:
        if candidate or item.is_dir(follow_symlinks=False):
            yield item.path, _row(item.path, open_error(item.path, exc))


def _file(
    item: os.DirEntry,  # type: ignore[type-arg]
    candidate: bool,
    link: bool,
    device: int,
    seen_files: Set[Tuple[int, int]],
) -> Iterator[Discovered]:
    """A file entry to read, once per file; a link to nothing named like a library raises
    OSError with the reason."""
    if item.is_file():
        file_key = _file_key(item, candidate, link, device)
        if file_key is not None and file_key not in seen_files:
            seen_files.add(file_key)
            yield item.path, None
    elif candidate and link:
        os.stat(item.path)  # raises with the reason: dangling link or a loop


def walk_binaries(
    paths: Iterable[str],
    deep: bool = False,
    progress: Optional[Progress] = None,
    summarize: Summarize = None,
) -> Iterator[BinaryFacts]:
    """``read_binary`` over every file under ``paths`` (see the module doc for which files);
    ``progress(done, total, path)`` is called as files are read; with ``summarize`` each file
    comes as one row per kind of entry (``summary.Summary``)."""
    found = list(discover(paths))
    to_read = [path for path, ready in found if ready is None]
    read = iter(read_binaries(to_read, deep, progress, summarize))
    for _, ready in found:
        yield next(read) if ready is None else replace(ready, deep=deep)


def collect_binaries(system: System, params: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Probe section "binaries": params {"paths": [...], "deep": bool, "detail": bool}, and
    "native_sets" (deep_plan.judged_native_sets: search deeply only where it can matter).

    Without ``detail`` (default: with it) entries that differ only in offset and size come as
    one (``probe.binary.summary``)."""
    paths = [str(p) for p in params.get("paths") or []]
    detail = bool(params.get("detail", True))
    deep = bool(params.get("deep", False))
    plan = params.get("native_sets")  # native targets per judged GPU
    # Summarized as each file is read: a helper process sends back summaries, not entries.
    summarize = None if detail else Summary
    if deep and plan is not None:
        found: Iterable[BinaryFacts] = read_selectively(
            list(discover(paths)), plan, system.progress, summarize
        )
    else:
        found = walk_binaries(paths, deep, system.progress, summarize)
    return [binary_json(facts, detail) for facts in with_runpaths(system.path, found)]


__all__ = [
    "Discovered",
    "collect_binaries",
    "discover",
    "walk_binaries",
]
