"""One outcome every hostile class shares: archgap never modifies what it inspects.

Each way a class hands archgap its input is watched: a run of archgap in another interpreter
(``python -m archgap``, or code that imports archgap: ``subprocess.run``), the readers and the api
called in-process, and ``fix``'s planning (a dry run). The files and trees a call names under the
session's temporary directory (but the files it is asked to write: ``OUTPUTS``) are fingerprinted
before it and compared after it: a regular file by its bytes (by size, mode and times when over
``HASHED_BYTES``: the sparse bombs), a link by its target, anything else (a FIFO, a socket) by
its kind, never opened. Only ``fix --apply`` and ``--undo`` are asked to write, and are not
watched; archgap's own cache (``XDG_CACHE_HOME``) is named in no call.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import os
import stat
import subprocess
import sys
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
HASHED_BYTES = 16 << 20  # files up to this are compared by content
MAX_ENTRIES = 20_000  # entries of one tree fingerprinted (the corpus's are far smaller)
# The in-process entry points the classes call, by module and name.
ENTRY_POINTS = (
    ("archgap.targets", "read_targets"),
    ("archgap.api", "scan_archives"),
    ("archgap.api", "kernels"),
    ("archgap.cli", "main"),
    ("archgap.probe.actions.fixer", "run"),
)
WRITING = ("--apply", "--undo", "apply", "undo")  # what fix is asked to write with
# Options whose value is a file archgap is asked to write (cli: write_atomic and --html).
OUTPUTS = ("--prometheus", "--nfd", "--out", "--html")


def fingerprint(path: str) -> list[tuple[str, str]]:
    """(relative name, what it is) for ``path`` and, for a directory, everything below it,
    nothing followed or opened but regular files."""
    found: list[tuple[str, str]] = []
    for name, full in _entries(path):
        found.append((name, _what(full)))
    return found


def _entries(path: str) -> Iterator[tuple[str, str]]:
    yield ".", path
    if not os.path.isdir(path) or os.path.islink(path):
        return
    count = 0
    for folder, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(dirs + files):
            count += 1
            if count > MAX_ENTRIES:
                return
            full = os.path.join(folder, name)
            yield os.path.relpath(full, path), full


def _what(full: str) -> str:
    try:
        info = os.lstat(full)
    except OSError as exc:
        return f"gone: {exc.strerror}"
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode):
        return f"link -> {os.readlink(full)}"
    if stat.S_ISDIR(info.st_mode):
        return f"dir {mode:o}"
    if not stat.S_ISREG(info.st_mode):
        return f"{stat.filemode(info.st_mode)} {info.st_ino}"
    if info.st_size > HASHED_BYTES:
        return f"file {mode:o} {info.st_size} {info.st_mtime_ns} {info.st_ctime_ns}"
    try:
        digest = hashlib.sha256()
        with open(full, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    except OSError as exc:  # a class made it unreadable: its metadata must hold still
        return f"file {mode:o} unreadable ({exc.strerror}) {info.st_mtime_ns} {info.st_ctime_ns}"
    return f"file {mode:o} {digest.hexdigest()}"


def named_inputs(values: Any, under: str) -> list[str]:
    """The existing local paths under ``under`` among ``values`` (strings, paths, file: URLs,
    and the lists, tuples, dicts and dataclasses holding them: argv, targets, a fix request)."""
    found: list[str] = []
    stack = [values]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            stack.extend(vars(value).values())  # IndexOptions: a file: index
        elif isinstance(value, list | tuple):
            stack.extend(value)
        elif isinstance(value, str | Path):
            text = str(value)
            if text.startswith("file:"):  # a wheel or an index given by its file: URL
                text = urllib.parse.unquote(urllib.parse.urlsplit(text).path)
            text = os.path.abspath(text) if text.startswith(("/", ".")) else ""
            if text.startswith(under + os.sep) and os.path.lexists(text):
                found.append(text)
    return sorted(set(found))


class Watch:
    """Fingerprints the inputs a call names before it and fails the test if it changed them."""

    def __init__(self, under: str) -> None:
        self.under = under
        self.checked: list[str] = []  # the inputs compared, for the corpus's own test

    def around(self, call: Callable[..., Any], values: Any) -> Any:
        inputs = named_inputs(values, self.under)
        before = {p: fingerprint(p) for p in inputs}
        result = call()
        for path, was in before.items():
            now = fingerprint(path)
            assert now == was, f"archgap modified what it inspected: {path}: {_changes(was, now)}"
        self.checked.extend(inputs)
        return result


def _changes(was: list[tuple[str, str]], now: list[tuple[str, str]]) -> str:
    old, new = dict(was), dict(now)
    changed = [f"{n}: {old.get(n)} -> {new.get(n)}" for n in sorted(old.keys() | new.keys())
               if old.get(n) != new.get(n)]  # fmt: skip
    return "; ".join(changed[:5])


def _runs_archgap(argv: list[Any] | tuple[Any, ...]) -> bool:
    """``python -m archgap ...``, or ``python -c CODE`` whose code imports archgap."""
    if not argv or argv[0] != sys.executable:
        return False
    words = [str(a) for a in argv[1:3]]
    return words == ["-m", "archgap"] or (words[:1] == ["-c"] and "archgap" in words[1])


def _writes(values: Any) -> bool:
    """``fix --apply``/``--undo``, or the fixer asked to apply or undo."""
    if isinstance(values, dict):
        return values.get("op") in WRITING
    return isinstance(values, list | tuple) and any(str(v) in WRITING for v in values)


@pytest.fixture(scope="module", autouse=True)
def watch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watch]:
    """Per module of the corpus: an autouse fixture comes first in its scope, so the inputs a
    module's own fixtures hand archgap are watched too; nothing stays patched after it."""
    found = Watch(str(tmp_path_factory.getbasetemp().resolve()))
    with pytest.MonkeyPatch.context() as patch:
        _watch_runs(found, patch)
        for module_name, name in ENTRY_POINTS:
            _watch_entry_point(found, patch, module_name, name)
        yield found


@pytest.fixture(autouse=True)
def inputs_compared(watch: Watch, request: pytest.FixtureRequest) -> Iterator[None]:
    """How many inputs each class had compared (``--junitxml`` shows it as a property)."""
    before = len(watch.checked)
    yield
    request.node.user_properties.append(("inputs_unchanged", len(set(watch.checked[before:]))))


def _watch_runs(watch: Watch, patch: pytest.MonkeyPatch) -> None:
    run = subprocess.run

    @functools.wraps(run)
    def watched_run(*args: Any, **kwargs: Any) -> Any:
        argv = args[0] if args else kwargs.get("args")
        if not isinstance(argv, list | tuple) or not _runs_archgap(argv) or _writes(argv):
            return run(*args, **kwargs)
        inputs = [a for i, a in enumerate(argv) if i == 0 or str(argv[i - 1]) not in OUTPUTS]
        return watch.around(lambda: run(*args, **kwargs), inputs)

    patch.setattr(subprocess, "run", watched_run)


def _watch_entry_point(
    watch: Watch, patch: pytest.MonkeyPatch, module_name: str, name: str
) -> None:
    module = importlib.import_module(module_name)
    original = getattr(module, name)

    @functools.wraps(original)
    def watched(*args: Any, **kwargs: Any) -> Any:
        if any(_writes(v) for v in (*args, *kwargs.values())):
            return original(*args, **kwargs)
        return watch.around(lambda: original(*args, **kwargs), (args, kwargs))

    patch.setattr(module, name, watched)
    for test_module in [m for m in list(sys.modules.values()) if _is_hostile(m)]:
        if getattr(test_module, name, None) is original:  # imported by name
            patch.setattr(test_module, name, watched)


def _is_hostile(module: Any) -> bool:
    """A test module of this corpus (it may import an entry point by name)."""
    where = getattr(module, "__file__", None) or ""
    return os.path.dirname(os.path.abspath(where)) == HERE
