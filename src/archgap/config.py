"""Defaults from a config file, so a CI gate is one word (`archgap scan`):

    [tool.archgap]            # in the project's pyproject.toml (the nearest one up from the cwd)
    gpus = ["RTX PRO 6000", "H100"]
    require = ["H100"]
    strict = true

or the same keys at the top level of ~/.config/archgap/config.toml ($XDG_CONFIG_HOME). The
project's file wins over the user's; an option given on the command line wins over both.

A config is the user's own, or it is data (git's safe.directory rule, CVE-2022-24765): the walk up
from the cwd stops at a directory owned by another user (not root, not the effective user) and at
a filesystem boundary; a file owned by another user is ignored (with a warning), and one writable
by others or by a group that is not its owner's private group is refused (an error: it would
decide a gate that anyone could rewrite). ``-v`` says which file applied, or why none did.
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from typing import Any

from archgap.errors import UsageError

KEYS = {"gpus": "gpu", "require": "require", "strict": "strict"}  # config key -> option attribute
# The commands whose --gpu/--require/--strict mean "judge against these GPUs" (explain's --gpu is
# the crashed host's, recipe's the build's, probe's --require a presence check: not these).
COMMANDS = ("scan", "kernels", "fleet")
MAX_BYTES = 1 << 20  # a config file larger than this is not a config file
PROJECT = "[tool.archgap]"
USER = "user config"


@dataclass(frozen=True)
class Found:
    """Which config file applies (``path`` "" when none), its table, why the walk up from the cwd
    stopped early ("DIR: owned by uid N"), and the files passed over as not the user's."""

    path: str = ""
    table: dict[str, Any] | None = None
    kind: str = ""  # PROJECT or USER
    stopped: str = ""
    ignored: tuple[str, ...] = ()
    reason: str = ""  # why no file was looked for ("explain reads no config file")

    def describe(self) -> str:
        """One line for -v: ``config: PATH ([tool.archgap])`` or ``config: none (why)``."""
        why = f"stopped at {self.stopped}" if self.stopped else self.reason
        if self.path:
            return f"config: {self.path} ({self.kind}{'; ' + why if why else ''})"
        return f"config: none ({why})" if why else "config: none"


def _toml(data: bytes, path: str) -> dict[str, Any]:
    import importlib

    # tomllib from Python 3.11; its backport, tomli, on 3.10 (a dependency there).
    tomllib = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
    try:
        table: dict[str, Any] = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not valid TOML: not UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    return table


def _private_group(gid: int, uid: int) -> bool:
    """The group is its owner's own (the user-private-group convention: the user's primary group,
    no other member), so a group-writable file is still only the owner's (Debian's OpenSSH)."""
    import grp
    import pwd

    try:
        user, group = pwd.getpwuid(uid), grp.getgrgid(gid)
    except KeyError:
        return False
    return user.pw_gid == gid and set(group.gr_mem) <= {user.pw_name}


def _read(path: str, euid: int) -> tuple[bytes | None, str]:
    """(the bytes of ``path``, "") when it is a regular file that is the user's or root's; (None,
    why it was passed over) when it is another user's; (None, "") when it is not a file. A file
    anyone else could rewrite is an error. Opened once, without blocking on a FIFO, and checked
    through its descriptor (no swap between the check and the read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None, ""
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, ""
        if info.st_uid not in (0, euid):
            return None, f"{path}: owned by uid {info.st_uid} (not you or root)"
        if info.st_mode & stat.S_IWOTH or (
            info.st_mode & stat.S_IWGRP and not _private_group(info.st_gid, info.st_uid)
        ):
            who = "others" if info.st_mode & stat.S_IWOTH else f"group {info.st_gid}"
            raise UsageError(
                f"{path}: writable by {who}: not read as a config file (chmod go-w {path}, "
                "or --no-config)"
            )
        data = handle.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise UsageError(f"{path}: over {MAX_BYTES >> 20} MiB: not a config file")
    return data, ""


def _project_table(data: bytes, path: str) -> Any:
    """The [tool.archgap] table of a pyproject.toml, or None. A file that never names archgap
    has none and is not parsed (parsing TOML is a noticeable part of a fast command's time)."""
    if b"archgap" not in data:
        return None
    return _toml(data, path).get("tool", {}).get("archgap")


def _stop_at(here: str, info: os.stat_result, device: int, euid: int) -> str:
    """Why the walk up must not read ``here`` ("" when it may)."""
    if info.st_dev != device:
        return f"{here}: another filesystem"
    if info.st_uid not in (0, euid):
        return f"{here}: owned by uid {info.st_uid}"
    return ""


def discover(
    cwd: str | None = None, environ: dict[str, str] | None = None, euid: int | None = None
) -> Found:
    """The nearest pyproject.toml with a [tool.archgap] table in a directory of the user's (or
    root's) on the cwd's filesystem, else the user's config file. (Paths as strings: pathlib is
    not imported by a command that has no config.)"""
    env = dict(os.environ) if environ is None else environ
    me = os.geteuid() if euid is None else euid
    here = os.path.realpath(cwd if cwd is not None else os.getcwd())
    ignored: list[str] = []
    stopped = ""
    device = os.stat(here).st_dev
    while True:
        stopped = _stop_at(here, os.stat(here), device, me)
        if stopped:
            break
        candidate = os.path.join(here, "pyproject.toml")
        data, why = _read(candidate, me)
        if why:
            ignored.append(why)
        elif data is not None:
            table = _project_table(data, candidate)
            if isinstance(table, dict):
                return Found(candidate, table, PROJECT, "", tuple(ignored))
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME", "~"), ".config")
    user = os.path.join(base, "archgap", "config.toml")
    data, why = _read(user, me)
    if why:
        ignored.append(why)
    elif data is not None:
        return Found(user, _toml(data, user), USER, stopped, tuple(ignored))
    return Found("", None, "", stopped, tuple(ignored))


def find_config(
    cwd: str | None = None, environ: dict[str, str] | None = None, euid: int | None = None
) -> tuple[str, dict[str, Any]] | None:
    """(file, settings) of ``discover``, or None when no file applies."""
    found = discover(cwd, environ, euid)
    return (found.path, found.table) if found.table is not None else None


def _checked(path: str, key: str, value: Any) -> Any:
    if key == "strict":
        if not isinstance(value, bool):
            raise UsageError(f"{path}: archgap setting {key!r} must be true or false")
        return value
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{path}: archgap setting {key!r} must be a list of GPU names")
    return value


def settings(command: str) -> tuple[Found, dict[str, Any]]:
    """The config that applies to ``command`` (``Found()`` when the command takes none) and its
    settings by option attribute (``gpus`` -> ``gpu``). Unknown keys are an error (a typo would
    silently do nothing)."""
    if command not in COMMANDS:
        return Found(reason=f"{command or 'this command'} reads no config file"), {}
    found = discover()
    if found.table is None:
        return found, {}
    path, table = found.path, found.table
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        known = ", ".join(KEYS)
        raise UsageError(
            f"{path}: unknown archgap setting(s) {', '.join(unknown)} (known: {known})"
        )
    return found, {KEYS[key]: _checked(path, key, value) for key, value in table.items()}
