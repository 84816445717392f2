"""The service's environment instead of the shell's: ``--env-from PID`` or ``--env-from FILE``.

A server's ``CUDA_HOME``, ``PATH`` and ``FLASHINFER_*`` come from its unit file or container, not
from the shell archgap runs in. ``PID`` reads ``/proc/PID/environ`` (through the system's root
prefix); ``FILE`` is an env file (``KEY=VALUE`` lines, ``export KEY=VALUE``, comments, quotes) or
the JSON of ``docker inspect`` (``Config.Env``). Only allowlisted variables are kept
(``system.allowlisted``): tokens and secrets are never read into the facts.
"""

from __future__ import annotations

import json
import os
import shlex
from typing import Any, Dict, List, Optional, Tuple

from .system import System, allowlisted


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


def parse_env_file(text: str) -> Tuple[Dict[str, str], List[str]]:
    """``KEY=VALUE`` lines (``export`` prefix, comments, quotes); returns (env, bad lines)."""
    env: Dict[str, str] = {}
    bad: List[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key or not all(c.isalnum() or c == "_" for c in key):
            bad.append("line %d" % number)
            continue
        try:
            words = shlex.split(value, comments=True)
            env[key] = words[0] if len(words) == 1 else _unquote(value)
        except ValueError:
            env[key] = _unquote(value)
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


def system_with_env_from(spec: str, base: System) -> Tuple[Optional[System], Optional[str]]:
    """(a System whose environment is ``spec``'s, None) or (None, why it could not be read)."""
    if spec.isdigit():
        proc_path = "/proc/%s/environ" % spec
        try:
            with open(base.path(proc_path), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None, "no process %s (%s does not exist)" % (spec, proc_path)
        except PermissionError:
            return None, "cannot read %s: permission denied (run as that user or root)" % proc_path
        except OSError as exc:
            return None, "cannot read %s: %s" % (proc_path, exc.strerror or exc)
        env = parse_proc_environ(data)
        source = proc_path
    else:
        try:
            with open(spec, encoding="utf-8", errors="replace") as f:
                text = f.read(4000000)
        except OSError as exc:
            return None, "cannot read env file %s: %s" % (spec, exc.strerror or exc)
        source = os.path.abspath(spec)
        stripped = text.lstrip()
        docker: Optional[Dict[str, str]] = None
        if stripped.startswith(("[", "{")):
            try:
                docker = _docker_env(json.loads(text))
            except ValueError:
                return None, "%s looks like JSON but does not parse" % spec
            if docker is None:
                return None, "%s is JSON without Config.Env (expected `docker inspect` output)" % (
                    spec
                )
            env = docker
            source = "%s (docker inspect Config.Env)" % source
        else:
            env, bad = parse_env_file(text)
            if bad and not env:
                return None, "%s is not an env file (no KEY=VALUE lines; bad: %s)" % (
                    spec,
                    ", ".join(bad[:5]),
                )
    return (
        System(
            root=base.root,
            env=tuple(sorted(allowlisted(env).items())),
            env_source=source,
            timeout=base.timeout,
        ),
        None,
    )
