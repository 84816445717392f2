"""What an assistant's tool call may make this server run and read (the trust model: an
argument is data, written by whoever wrote the text the assistant read).

- A program is run only when the user named it when starting the server: a ``via`` prefix
  only if it is exactly one of ``--allow-via``; a ``python`` only if it is the interpreter of a
  real environment (a ``pyvenv.cfg`` beside it or one directory up, or a ``conda-meta``
  directory in the environment's root) whose final target, links followed, is an executable
  owned by root or this user that no one else may write, or one given with ``--allow-python``.
- Files are read only inside the roots: those the client declares (MCP ``roots``) and those
  given with ``--allow-root``; with neither, a path argument is refused. Paths are compared
  after resolving every link (``realpath``), so a link out of a root is refused too.

Both hold for the machine the server runs on; on a named target (host, container, pod, an
allowed ``via``) the paths and the interpreter are that machine's.
"""

from __future__ import annotations

import os
import shlex
import stat
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from archgap.mcp.schema import ArgumentError
from archgap.transport.target import TARGET_KINDS

# Arguments that name files or directories here (when no target is named).
PATH_ARGUMENTS = ("paths", "documents", "from_paths", "env_file", "state_dir", "systemd_dir")
# kernels also takes what is not a local file: a wheel's URL, a requirement, a registry image.
REMOTE_SOURCES = ("http://", "https://", "docker://")
IMAGE_PREFIXES = ("oci:", "docker-archive:", "rootfs:")  # each followed by a local path
SYSTEMD_DIR = "/etc/systemd/system"  # api.fix's default, read when a unit is named


class TrustError(ArgumentError):
    """A call that would run a program or read a file the user did not allow: one line."""


@dataclass(frozen=True)
class Policy:
    """What the user allowed when starting the server: exact ``via`` prefixes, interpreters
    (absolute paths), and directories to read (resolved)."""

    allow_via: tuple[str, ...] = ()
    allow_python: tuple[str, ...] = ()
    allow_roots: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, via: Iterable[str] = (), python: Iterable[str] = (), roots: Iterable[str] = ()
    ) -> Policy:
        return cls(
            tuple(dict.fromkeys(v.strip() for v in via if v.strip())),
            tuple(dict.fromkeys(os.path.abspath(p) for p in python if p)),
            tuple(dict.fromkeys(os.path.realpath(r) for r in roots if r)),
        )

    def check(
        self, command: str, arguments: Mapping[str, Any], declared: Sequence[str] | None
    ) -> None:
        """Refuse (``TrustError``) a call whose ``via`` is not allowed, whose ``python`` may
        not run, or that names a path outside the roots (the client's ``declared``, resolved,
        and ``--allow-root``)."""
        self.check_via(arguments)
        if any(arguments.get(kind) for kind in TARGET_KINDS):
            return  # the paths and the interpreter are the target's
        roots = Roots(self.allow_roots, tuple(declared or ()))
        python = arguments.get("python")
        if python:
            self._check_python(str(python), roots)
        for name, value in _named_paths(command, arguments):
            roots.check(name, value)

    def check_via(self, arguments: Mapping[str, Any]) -> None:
        """Refuse a ``via`` unless it is one of the allowed prefixes, word for word."""
        if "via" not in arguments:
            return
        via = str(arguments["via"])
        if not self.allow_via:
            raise TrustError(
                "via runs a program here: it is off unless the server is started with "
                "--allow-via PREFIX (name the target with host, container or pod instead)"
            )
        if _words(via) not in [_words(allowed) for allowed in self.allow_via]:
            raise TrustError(
                f"via {via!r} is not one of the prefixes the server was started with "
                f"(--allow-via): {', '.join(repr(a) for a in self.allow_via)}"
            )

    def _check_python(self, python: str, roots: Roots) -> None:
        if os.path.abspath(python) in self.allow_python:
            return
        why, environment = interpreter_problem(python)
        if why:
            raise TrustError(
                f"python {python}: {why}; archgap mcp runs only the interpreter of a Python "
                "environment (or one given with --allow-python)"
            )
        roots.check("python", environment, shown=python)


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return [command]


@dataclass(frozen=True)
class Roots:
    """The directories a call may read: ``allowed`` (resolved at start) and the client's
    ``declared`` ones (file: URIs or paths, resolved here)."""

    allowed: tuple[str, ...]
    declared: tuple[str, ...]

    @property
    def resolved(self) -> tuple[str, ...]:
        return self.allowed + tuple(os.path.realpath(root) for root in self.declared)

    def check(self, name: str, path: str, shown: str | None = None) -> None:
        roots = self.resolved
        if not roots:
            raise TrustError(
                f"{name} {shown or path}: archgap mcp reads files only inside the client's "
                "roots or a directory given with --allow-root, and there is none"
            )
        real = os.path.realpath(path)
        if not any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots):
            if shown is not None:
                what = f"{name} {shown}: its environment {real}"
            elif real != os.path.abspath(path):
                what = f"{name} {path} (resolved: {real})"
            else:
                what = f"{name} {path}"
            raise TrustError(
                f"{what} is outside the roots this server may read: {', '.join(roots)}"
            )


def root_paths(uris: Iterable[str]) -> tuple[str, ...]:
    """The local directories of the client's roots (``file:`` URIs; others are ignored)."""
    found: list[str] = []
    for uri in uris:
        parts = urllib.parse.urlsplit(str(uri))
        if parts.scheme == "file" and parts.netloc in ("", "localhost"):
            path = urllib.parse.unquote(parts.path)
            if path.startswith("/"):
                found.append(path)
    return tuple(found)


def _named_paths(command: str, arguments: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(argument, local path) for each file or directory the call names here."""
    found: list[tuple[str, str]] = []
    for name in PATH_ARGUMENTS:
        value = arguments.get(name)
        values = value if isinstance(value, list | tuple) else [value] if value else []
        for one in (str(v) for v in values):
            local = _sources(one) if command == "kernels" and name == "paths" else [one]
            found.extend((name, path) for path in local)
    env_from = arguments.get("env_from")
    if env_from and not str(env_from).isdigit():  # a process id is read from /proc: not a path
        found.append(("env_from", str(env_from)))
    systemd = arguments.get("systemd")
    if systemd:
        if "/" in str(systemd) or str(systemd) in (".", ".."):
            raise TrustError(f"systemd {systemd!r}: a unit's name, not a path")
        if not arguments.get("systemd_dir"):
            found.append(("systemd_dir", SYSTEMD_DIR))
    return found


def _sources(value: str) -> list[str]:
    """The local paths a kernels source reads: none for a URL, a registry image or a
    requirement, the path of a ``file:`` URL or a local image (with and without its
    ``:TAG``), else the path itself."""
    if value.startswith(REMOTE_SOURCES):
        return []
    if value.startswith("file:"):
        return [urllib.parse.unquote(urllib.parse.urlsplit(value).path) or "/"]
    for prefix in IMAGE_PREFIXES:
        if value.startswith(prefix):
            rest = value[len(prefix) :]
            return [rest, rest.rsplit(":", 1)[0]] if ":" in rest else [rest]
    if "@" in value and "file:" in value.split("@", 1)[1]:  # name @ file:///... reads a file
        reference = value.split("@", 1)[1].strip()
        return _sources(reference[reference.index("file:") :])
    from archgap.binaries import is_index_target

    return [] if is_index_target(value) else [value]


def interpreter_problem(python: str, uid: int | None = None) -> tuple[str, str]:
    """Why ``python`` is not the interpreter of a real environment here (empty when it is),
    and the environment's root. The directory it is named in is resolved; the interpreter
    itself may be a link (a venv's usually is, to a system Python), and its final target must
    be an executable owned by root or ``uid`` (this user) that only its owner may write."""
    if os.sep not in python:
        return "not a path: name the interpreter of an environment by its path", ""
    where = os.path.realpath(os.path.dirname(os.path.abspath(python)))
    environment = next((d for d in (where, os.path.dirname(where)) if _is_environment(d)), "")
    if not environment:
        return "no pyvenv.cfg beside it or one directory up, no conda-meta: not an environment", ""
    target = os.path.realpath(os.path.join(where, os.path.basename(python)))
    why = _unsafe(target, uid if uid is not None else os.getuid())
    return (f"it runs {target}, {why}" if why else ""), environment


def _is_environment(directory: str) -> bool:
    venv = _lstat(os.path.join(directory, "pyvenv.cfg"))
    if venv is not None and stat.S_ISREG(venv.st_mode):
        return True
    conda = _lstat(os.path.join(directory, "conda-meta"))
    return conda is not None and stat.S_ISDIR(conda.st_mode)


def _unsafe(target: str, uid: int) -> str:
    """Why the file ``target`` (resolved) may not be run: empty when it may."""
    info = _lstat(target)
    if info is None or not stat.S_ISREG(info.st_mode):
        return "which is not a file"
    if not info.st_mode & 0o111:
        return "which is not executable"
    for path, what, entry in (
        (target, "it", info),
        (os.path.dirname(target), "its directory", _lstat(os.path.dirname(target))),
    ):
        if entry is None:
            return f"{what} cannot be read"
        if entry.st_uid not in (0, uid):
            return f"{what} is owned by uid {entry.st_uid} (neither root nor this user)"
        sticky = stat.S_ISDIR(entry.st_mode) and entry.st_mode & stat.S_ISVTX
        if entry.st_mode & 0o022 and not sticky:
            return f"{what} ({path}) is writable by others"
    return ""


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None
