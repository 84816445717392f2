"""The service's environment instead of the shell's: ``--env-from PID`` or ``--env-from FILE``.

A server's ``CUDA_HOME``, ``PATH`` and ``FLASHINFER_*`` come from its unit file or container, not
from the shell archgap runs in. ``PID`` reads ``/proc/PID/environ`` (through the system's root
prefix); ``FILE`` is an env file (``KEY=VALUE`` lines, ``export KEY=VALUE``, comments, quotes) or
the JSON of ``docker inspect`` (``Config.Env``). Only allowlisted variables are kept
(``envvars.allowlisted``): tokens and secrets are never read into the facts.
"""

from __future__ import annotations

import json
import os
import shlex
from typing import Any, Dict, List, Optional, Tuple

from .envvars import allowlisted
from .system import System, read_regular

MAX_ENV_BYTES = 64 << 20  # an env file, a `docker inspect` document or a /proc/PID/environ


def parse_proc_environ(data: bytes) -> Dict[str, str]:
    """``/proc/PID/environ``: NUL-separated ``KEY=VALUE`` entries."""
    env: Dict[str, str] = {}
    for item in data.split(b"\0"):
        if b"=" not in item:
            continue
        key, _, value = item.decode("utf-8", "replace").partition("=")
        if key:
            env[key] = value
    return env


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    # An unquoted value ends at an inline comment (" #"), as in shell and systemd env files.
    cut = value.find(" #")
    return value[:cut].rstrip() if cut >= 0 else value


def _is_name(key: str) -> bool:
    return bool(key) and all(c.isalnum() or c == "_" for c in key) and not key[0].isdigit()


def _assignments(line: str) -> Optional[List[Tuple[str, str]]]:
    """The ``KEY=VALUE`` words of one line as a shell reads them (``A=x B=y`` sets both), or
    None when a word is not an assignment (a shell would run it as a command)."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:  # an unclosed quote: the value is the rest of the line
        key, _, value = line.partition("=")
        return [(key.strip(), _unquote(value))] if _is_name(key.strip()) else None
    pairs: List[Tuple[str, str]] = []
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not _is_name(key):
            return None
        pairs.append((key, value))
    return pairs


def parse_env_file(text: str) -> Tuple[Dict[str, str], List[str]]:
    """``KEY=VALUE`` lines (``export`` prefix, comments, quotes, several assignments on one
    line); returns (env, bad lines)."""
    env: Dict[str, str] = {}
    bad: List[str] = []
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        pairs = _assignments(line)
        if not pairs:
            bad.append("line %d" % number)
            continue
        env.update(pairs)
    return env, bad


def _docker_env(data: Any) -> Optional[Dict[str, str]]:
    """``Config.Env`` of ``docker inspect`` output (a list of objects, or one object)."""
    items = data if isinstance(data, list) else [data]
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("Config"), dict):
            entries = item["Config"].get("Env")
            if isinstance(entries, list):
                env: Dict[str, str] = {}
                for entry in entries:
                    if isinstance(entry, str) and "=" in entry:
                        key, _, value = entry.partition("=")
                        env[key] = value
                return env
    return None


def _read_proc_environ(spec: str, base: System) -> Tuple[Optional[Dict[str, str]], str]:
    """(env, "/proc/PID/environ") of a PID, or (None, why not)."""
    proc_path = "/proc/%s/environ" % spec
    try:
        data, _ = read_regular(base.path(proc_path), MAX_ENV_BYTES)
    except FileNotFoundError:
        return None, "no process %s (%s does not exist)" % (spec, proc_path)
    except PermissionError:
        return None, "cannot read %s: permission denied (run as that user or root)" % proc_path
    except OSError as exc:
        return None, "cannot read %s: %s" % (proc_path, exc.strerror or exc)
    if not data:
        return None, "%s is empty (a kernel thread or a process that is exiting)" % proc_path
    return parse_proc_environ(data), proc_path


def _parse_env_data(spec: str, data: bytes) -> Tuple[Optional[Dict[str, str]], str]:
    """(env, source suffix) of a file's bytes: NUL-separated (a copy of /proc/PID/environ),
    ``docker inspect`` JSON, or an env file; or (None, why not)."""
    if b"\0" in data:
        return parse_proc_environ(data), " (NUL-separated, as /proc/PID/environ)"
    text = data.decode("utf-8", "replace")
    if text.lstrip().startswith(("[", "{")):
        try:
            docker = _docker_env(json.loads(text))
        except (ValueError, RecursionError):
            return None, "%s looks like JSON but does not parse (or nests too deeply)" % spec
        if docker is None:
            return None, "%s is JSON without Config.Env (expected `docker inspect` output)" % spec
        return docker, " (docker inspect Config.Env)"
    env, bad = parse_env_file(text)
    if bad and not env:
        return None, "%s is not an env file (no KEY=VALUE lines; bad: %s)" % (
            spec,
            ", ".join(bad[:5]),
        )
    return env, ""


def system_with_env_from(spec: str, base: System) -> Tuple[Optional[System], Optional[str]]:
    """(a System whose environment is ``spec``'s, None) or (None, why it could not be read)."""
    env: Optional[Dict[str, str]]
    if spec.isdigit():
        env, source = _read_proc_environ(spec, base)
        if env is None:
            return None, source
    else:
        try:
            data, more = read_regular(spec, MAX_ENV_BYTES)
        except OSError as exc:
            return None, "cannot read env file %s: %s" % (spec, exc.strerror or exc)
        if more:
            return None, "%s is over %d MiB: not an environment" % (spec, MAX_ENV_BYTES >> 20)
        env, suffix = _parse_env_data(spec, data)
        if env is None:
            return None, suffix
        source = os.path.abspath(spec) + suffix
    return (
        System(
            root=base.root,
            env=tuple(sorted(allowlisted(env).items())),
            env_source=source,
            timeout=base.timeout,
        ),
        None,
    )
