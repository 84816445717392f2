"""Which environment ``explain`` examines when the caller names none, and why.

In order: the environment the log's traceback names (``/root/venv/lib/python3.12/site-packages/
...`` -> ``/root/venv/bin/python3.12``) where it exists on this machine, is a real environment (a
``pyvenv.cfg`` or ``conda-meta`` in its prefix) and may be run (see below); else the active one
(``VIRTUAL_ENV``, ``CONDA_PREFIX``) unless it is archgap's own (``sys.prefix``); else the log
alone. Never archgap's own interpreter by default: under pipx it is never the one that crashed.

Examining an environment asks its interpreter for its paths (``python -I -S``: none of the
environment's code runs, but the interpreter and the stdlib its ``pyvenv.cfg`` points at do).
The log is data: an interpreter it names is run only where nobody but the caller or root can
have put it there: the interpreter, its prefix, ``bin``, ``pyvenv.cfg`` and every directory
above them are owned by the caller or root and not writable by others (a sticky directory such
as /tmp excepted). Anything else is read as the log alone, saying why.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from archgap.analysis.explain.logparse import ParsedLog

# A frame in an environment's site-packages: its prefix and its pythonX.Y directory.
_SITE = re.compile(
    r"^(?P<prefix>/[^\0]{0,900}?)/lib(?:64)?/(?P<py>python\d(?:\.\d{1,3})?t?)/"
    r"(?:site|dist)-packages/"
)
MAX_NAMED = 8  # environments taken from one log (frames are many; environments a few)

LOG_NAMES = "the environment the log's traceback names"


@dataclass(frozen=True)
class Named:
    """An environment a log's traceback names: where it is, its pythonX.Y, its site dir."""

    prefix: str
    python: str  # "python3.12"
    site: str  # "<prefix>/lib/python3.12/site-packages"


@dataclass(frozen=True)
class Choice:
    """The interpreter to examine (None: the log alone) and why, in words."""

    python: str | None
    why: str


def named_environments(log: ParsedLog) -> tuple[Named, ...]:
    """The environments the log's tracebacks name, the last traceback's first and, in each, the
    innermost frame's first (the error's own environment leads)."""
    found: dict[str, Named] = {}
    for traceback in reversed(log.tracebacks):
        for frame in reversed(traceback.frames):
            match = _SITE.match(frame.file)
            if match is None or match.group("prefix") in found:
                continue
            prefix = os.path.normpath(match.group("prefix"))
            site = frame.file[: match.end() - 1]
            found[prefix] = Named(prefix, match.group("py"), os.path.normpath(site))
            if len(found) >= MAX_NAMED:
                return tuple(found.values())
    return tuple(found.values())


def own_prefix() -> str:
    """archgap's own environment (the prefix of the interpreter running it)."""
    return os.path.realpath(sys.prefix)


def choose(log: ParsedLog, environ: Mapping[str, str]) -> Choice:
    """The environment to examine on this machine when the caller named none (module doc)."""
    skipped: list[str] = []
    for named in named_environments(log):
        python, why_not = _usable(named)
        if python is not None:
            return Choice(python, LOG_NAMES)
        skipped.append(why_not)
    for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        home = environ.get(variable)
        if not home:
            continue
        if os.path.realpath(home) == own_prefix():
            skipped.append(f"{variable} is archgap's own environment")
            continue
        for name in ("bin/python", "bin/python3"):
            candidate = os.path.join(home, name)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return Choice(candidate, f"the active environment, {variable}={home}")
        skipped.append(f"{variable}={home} has no bin/python")
    if not skipped:
        skipped.append("no --python, the log names no environment and none is active")
    return Choice(None, "; ".join(skipped[:3]))


def _usable(named: Named) -> tuple[str | None, str]:
    """The interpreter of an environment the log names, or why it is not examined."""
    prefix = named.prefix
    if not os.path.isdir(prefix):
        return None, f"the log's environment {prefix} is not on this machine"
    real = os.path.isfile(os.path.join(prefix, "pyvenv.cfg")) or os.path.isdir(
        os.path.join(prefix, "conda-meta")
    )
    if not real:
        return None, f"the log's {prefix} is not a virtual or conda environment"
    if os.path.realpath(prefix) == own_prefix():
        return None, f"the log's environment {prefix} is archgap's own"
    for name in (named.python, "python3", "python"):
        candidate = os.path.join(prefix, "bin", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            problem = _untrusted(prefix, candidate)
            if problem:
                return None, f"the log's environment {prefix} is not run: {problem}"
            return candidate, ""
    return None, f"the log's environment {prefix} has no bin/{named.python}"


def _untrusted(prefix: str, python: str) -> str:
    """Why running ``python`` of ``prefix`` would run what someone other than the caller or
    root could have put there ("" when nobody else could)."""
    paths = [prefix, os.path.join(prefix, "bin"), python, os.path.realpath(python)]
    cfg = os.path.join(prefix, "pyvenv.cfg")
    if os.path.lexists(cfg):
        paths.append(cfg)
    seen: set[str] = set()
    for path in paths:
        for place in _with_parents(os.path.realpath(path)):
            if place in seen:
                continue
            seen.add(place)
            problem = _unsafe(place)
            if problem:
                return problem
    return ""


def _with_parents(path: str) -> list[str]:
    out = [path]
    while os.path.dirname(out[-1]) != out[-1]:
        out.append(os.path.dirname(out[-1]))
    return out


def _unsafe(path: str) -> str:
    try:
        info = os.stat(path)
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    if info.st_uid not in (os.geteuid(), 0):
        return f"{path} is owned by another user (uid {info.st_uid})"
    sticky_dir = stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not sticky_dir:
        return f"{path} is writable by others (mode {stat.S_IMODE(info.st_mode):o})"
    return ""


def mismatch(
    named: tuple[Named, ...], sites: tuple[str, ...], examined: str, *, here: bool = True
) -> str:
    """The note when the log's frames name environments and the examined one is none of them
    ("" otherwise): site dirs compared as paths and, on this machine (``here``), as real paths."""
    if not named:
        return ""
    same = os.path.realpath if here else os.path.normpath
    seen = {os.path.normpath(s) for s in sites} | {same(s) for s in sites}
    if any(n.site in seen or same(n.site) in seen for n in named):
        return ""
    first = named[0]
    return (
        f"the log's interpreter ({first.prefix}, {first.python}) is not the one examined "
        f"({examined}): what was read there may differ from what crashed"
    )
