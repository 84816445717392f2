"""Fast access to Python source without importing it: find files, find candidates, read them.

Shared by ``trace`` and ``gates``. Speed comes from never parsing what cannot
match: a bytes search picks candidate files, and only the top-level ``def``/``class``/statement
that encloses a hit is parsed (``sourcefile.SourceFile``; the whole module only when that block
cannot be cut out cleanly). Nothing here writes anywhere; source that does not decode or parse
becomes a ``Problem``.
"""

from __future__ import annotations

import io
import os
import pickle
import re
import stat
import tokenize
from typing import Callable, Dict, Iterable, List, Optional, Pattern, Sequence, Tuple, TypeVar

from ..environment.system import read_regular
from ..facts import Problem
from ..forked import in_two_processes

T = TypeVar("T")
Candidates = List[Tuple[str, bytes]]  # (path, bytes) of the files that hold a needle

# Most .py files are far smaller; larger ones are read in further chunks.
_READ_BUFFER = 1 << 22
# Generated monsters beyond this are reported, never read whole (an AST costs ~250 bytes of
# memory per byte of dense source: a 50 MB file took 12 GB).
_MAX_FILE_BYTES = 8 << 20


def python_files(
    paths: Iterable[str], roots: Optional[Sequence[str]] = None
) -> Tuple[List[str], List[Problem]]:
    """Every ``.py`` file under ``paths`` (files are taken as they are); symlinked dirs skipped,
    and a symlinked file whose target is outside the walked tree is a problem, not read. The
    tree is ``roots`` (directories, resolved) when given (the directories of ``paths`` are
    pieces of them), else each directory of ``paths``."""
    files: List[str] = []
    problems: List[Problem] = []
    stack: List[Tuple[str, Sequence[str]]] = []
    for path in paths:
        if os.path.isdir(path):
            stack.append((path, roots if roots is not None else (os.path.realpath(path),)))
        elif os.path.lexists(path):
            if path.endswith(".py"):
                files.append(path)  # a FIFO or device is reported when it is opened
        else:
            problems.append(Problem(path, "no such file or directory"))
    while stack:
        directory, inside = stack.pop()
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    _take(entry, inside, files, problems, stack)
        except OSError as exc:
            problems.append(Problem(directory, "cannot list: %s" % (exc.strerror or exc)))
    return files, problems


def _take(
    entry: os.DirEntry,  # type: ignore[type-arg]
    inside: Sequence[str],
    files: List[str],
    problems: List[Problem],
    stack: List[Tuple[str, Sequence[str]]],
) -> None:
    """One directory entry of the walk: a .py file to read (a link out of the tree a
    problem), a directory to walk (not __pycache__, not through a link)."""
    name = entry.name
    try:
        if name.endswith(".py"):
            why = _link_out(inside, entry.path) if entry.is_symlink() else None
            if why:
                problems.append(Problem(entry.path, why))
            elif entry.is_file():
                files.append(entry.path)
        elif entry.is_dir(follow_symlinks=False) and name != "__pycache__":
            stack.append((entry.path, inside))
    except OSError:
        pass  # vanished while listing


def _link_out(roots: Sequence[str], path: str) -> Optional[str]:
    """Why the link ``path`` is not followed: its target is inside none of ``roots``."""
    if not os.path.islink(path):
        return None
    target = os.path.realpath(path)
    if any(target == r or target.startswith(r.rstrip(os.sep) + os.sep) for r in roots):
        return None
    return "a link out of the walked tree (-> %s): not followed" % os.readlink(path)[:256]


def candidate_files(
    paths: Iterable[str], needles: Sequence[bytes]
) -> Tuple[int, Candidates, List[Problem]]:
    """(.py files scanned, (path, bytes) of those holding a needle, problems) under ``paths``."""
    count, halves, problems = candidate_work(paths, needles, lambda found: found)
    return count, [item for half in halves for item in half], problems


def candidate_work(
    paths: Iterable[str], needles: Sequence[bytes], work: Callable[[Candidates], T]
) -> Tuple[int, List[T], List[Problem]]:
    """(.py files scanned, ``work`` of the candidates, problems) under ``paths``: the candidates
    are the (path, bytes) of the files that hold a needle.

    With more than one core a forked child walks and reads every other second-level entry, runs
    ``work`` on its candidates and sends back its count, problems and result (pickled): walking,
    reading and the work on what was found run in parallel, each file in one process only. When
    the child cannot start or fails, its half is done here; with one core, one ``work`` for all.
    """
    paths = list(paths)
    units, problems = _work_units(paths)
    roots = [os.path.realpath(p) for p in paths if os.path.isdir(p)]

    def half(part: List[str]) -> Tuple[int, T, List[Problem]]:
        count, found, half_problems = _walk_and_scan(part, needles, roots)
        return count, work(found), half_problems

    if len(units) < 8 or (os.cpu_count() or 1) < 2 or not hasattr(os, "fork"):
        count, result, more = half(units)
        return count, [result], problems + more
    mine, sent = in_two_processes(
        lambda _send: pickle.dumps(half(units[1::2]), pickle.HIGHEST_PROTOCOL),
        lambda: half(units[0::2]),
    )
    # The pickle comes from this process's own forked child, through a pipe only they share.
    theirs: Tuple[int, T, List[Problem]] = (
        pickle.loads(sent) if sent is not None else half(units[1::2])
    )
    return mine[0] + theirs[0], [mine[1], theirs[1]], problems + mine[2] + theirs[2]


def _work_units(paths: Iterable[str]) -> Tuple[List[str], List[Problem]]:
    """Files and directories two levels below each root: pieces of similar size to share out."""
    units: List[str] = []
    problems: List[Problem] = []
    for path in paths:
        if not os.path.isdir(path):
            units.append(path)
            continue
        root = (os.path.realpath(path),)
        for entry in _entries(path, problems):
            if entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__":
                units.extend(_units_of(_entries(entry.path, problems), root, problems))
            else:
                units.extend(_units_of([entry], root, problems))
    return units, problems


def _units_of(
    entries: Iterable[os.DirEntry],  # type: ignore[type-arg]
    root: Sequence[str],
    problems: List[Problem],
) -> List[str]:
    """The entries' paths, less symlinked directories (not followed) and files linked out of
    ``root`` (problems)."""
    kept: List[str] = []
    for entry in entries:
        why = _link_out(root, entry.path) if entry.name.endswith(".py") else None
        if why:
            problems.append(Problem(entry.path, why))
        elif not _linked_dir(entry):
            kept.append(entry.path)
    return kept


def _linked_dir(entry: os.DirEntry) -> bool:  # type: ignore[type-arg]
    try:
        return entry.is_symlink() and entry.is_dir()
    except OSError:
        return False


def _entries(directory: str, problems: List[Problem]) -> List[os.DirEntry]:  # type: ignore[type-arg]
    try:
        with os.scandir(directory) as entries:
            return list(entries)
    except OSError as exc:
        problems.append(Problem(directory, "cannot list: %s" % (exc.strerror or exc)))
        return []


def _walk_and_scan(
    units: Sequence[str], needles: Sequence[bytes], roots: Sequence[str]
) -> Tuple[int, List[Tuple[str, bytes]], List[Problem]]:
    """The units (pieces of the directories ``roots``, or files named) walked and scanned."""
    pieces = (u for u in units if os.path.isdir(u) or u.endswith(".py"))
    files, walk_problems = python_files(pieces, roots)
    found, read_problems = _scan(files, needles)
    return len(files), found, walk_problems + read_problems


def _scan(
    files: Sequence[str], needles: Sequence[bytes]
) -> Tuple[List[Tuple[str, bytes]], List[Problem]]:
    """One read per file into a reused buffer; the bytes of the files that hold a needle."""
    found: List[Tuple[str, bytes]] = []
    problems: List[Problem] = []
    buffer = bytearray(_READ_BUFFER)
    buffers = [buffer]
    # O_NONBLOCK: a FIFO named x.py must not wait for a writer (fstat then skips it).
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    open_, readv, close, fstat = os.open, os.readv, os.close, os.fstat
    for path in files:
        try:
            fd = open_(path, flags)
        except OSError as exc:
            problems.append(Problem(path, "cannot read: %s" % (exc.strerror or exc)))
            continue
        try:
            info = fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_FILE_BYTES:
                problems.append(Problem(path, _not_read(info)))
                continue
            size = readv(fd, buffers)
            data: Optional[bytes] = None
            if size == _READ_BUFFER:  # a large file: read the rest
                data = _with_rest(fd, bytes(buffer))
        except OSError as exc:
            problems.append(Problem(path, "cannot read: %s" % (exc.strerror or exc)))
            continue
        finally:
            close(fd)
        if data is None:
            for needle in needles:
                if buffer.find(needle, 0, size) >= 0:
                    found.append((path, bytes(buffer[:size])))
                    break
        elif any(needle in data for needle in needles):
            found.append((path, data))
    return found, problems


def _with_rest(fd: int, start: bytes) -> bytes:
    """``start`` and the rest of the file open at ``fd``, read to its end."""
    chunks = [start]
    while True:
        chunk = os.read(fd, _READ_BUFFER)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _not_read(info: os.stat_result) -> str:
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    return "larger than %d MiB: not read" % (_MAX_FILE_BYTES >> 20)


def read_bytes(path: str) -> bytes:
    """A source file's bytes (at most one byte past _MAX_FILE_BYTES); OSError for a file that
    is not regular."""
    data, more = read_regular(path, _MAX_FILE_BYTES)
    return data + b" " if more else data


def decode_source(data: bytes) -> str:
    """Source text as Python decodes it: a BOM or PEP 263 coding cookie, else UTF-8."""
    head = data[:400]
    if head.startswith(b"\xef\xbb\xbf") or b"coding" in head:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
        return text[1:] if text.startswith("\ufeff") else text
    return data.decode("utf-8")


def line_numbers(text: str, starts: Iterable[int]) -> List[int]:
    """1-based numbers of the lines holding the ascending offsets ``starts``, once each."""
    lines: List[int] = []
    line, counted = 1, 0
    for start in starts:
        line += text.count("\n", counted, start)
        counted = start
        if not lines or lines[-1] != line:
            lines.append(line)
    return lines


def word_pattern(word: str) -> Pattern[str]:
    return re.compile(r"(?<![\w])" + re.escape(word) + r"(?![\w])")


SITE_DIRS = ("site-packages", "dist-packages")


def module_name(path: str, cache: Dict[str, bool]) -> Tuple[str, str]:
    """(dotted module name, import root) of a file: under a site-packages directory, its path
    from there (namespace packages and vendored trees without ``__init__.py`` included: a bare
    file name says too little); elsewhere by walking up over ``__init__.py`` directories."""
    absolute = os.path.abspath(path)
    parts = absolute.split(os.sep)
    for index in range(len(parts) - 2, 0, -1):
        if parts[index] in SITE_DIRS and absolute.endswith(".py"):
            relative = parts[index + 1 :]
            relative[-1] = relative[-1][:-3]
            if relative[-1] == "__init__" and len(relative) > 1:
                relative.pop()
            return ".".join(relative), os.sep.join(parts[: index + 1])
    directory, filename = os.path.split(absolute)
    parts = [] if filename == "__init__.py" else [filename[:-3]]
    while True:
        has_init = cache.get(directory)
        if has_init is None:
            has_init = os.path.isfile(os.path.join(directory, "__init__.py"))
            cache[directory] = has_init
        if not has_init:
            break
        directory, package = os.path.split(directory)
        parts.insert(0, package)
        if not package:
            break
    return ".".join(parts), directory


def module_path(root: str, module: str) -> Optional[str]:
    """The file of a dotted module under an import root, or None."""
    base = os.path.join(root, *module.split("."))
    for candidate in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(candidate):
            return candidate
    return None
