"""What every command shares: options, output (rich text or JSON), progress, exit codes."""

from __future__ import annotations

import argparse
import os
import shutil
from typing import TYPE_CHECKING, Any

from archgap.cli.options import SUMMARY_FORMATS as SUMMARY_FORMATS
from archgap.cli.options import TABLE_FORMATS as TABLE_FORMATS
from archgap.errors import UsageError as UsageError  # one class for the api and the cli
from archgap.report.console import Output as Output
from archgap.report.console import emit_text as emit_text
from archgap.report.console import plain_text as plain_text
from archgap.report.console import redact_output as redact_output
from archgap.report.markup import escape as escape
from archgap.report.visible import terminal_safe as terminal_safe
from archgap.transport.target import DEFAULT_CONNECT_TIMEOUT, DEFAULT_PYTHON

if TYPE_CHECKING:
    from archgap.transport.target import Target

EXIT_OK = 0
EXIT_GAP = 1
EXIT_ERROR = 2


def default_python(environ: dict[str, str] | None = None) -> tuple[str | None, str]:
    """The interpreter to inspect when --python is not given, and why that one: the active
    virtual environment, else the active conda environment, else python3 on PATH (not archgap's
    own, which pipx or a venv of its own would make a useless default)."""
    env = dict(os.environ) if environ is None else environ
    for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        home = env.get(variable)
        for name in ("bin/python", "bin/python3") if home else ():
            candidate = os.path.join(home or "", name)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate, f"{variable}={home}"
    found = shutil.which("python3", path=env.get("PATH", os.defpath))
    if found:
        return found, "python3 on PATH"
    return None, "archgap's own interpreter: no VIRTUAL_ENV, CONDA_PREFIX or python3 on PATH"


def choose_python(args: argparse.Namespace) -> None:
    """Fill in ``args.python`` (when a command inspects an environment here and none is named)
    and ``args.python_source``: which interpreter, and why, for every command to say."""
    if not hasattr(args, "python") or getattr(args, "command", "") not in LOCAL_ENVIRONMENT:
        return
    if getattr(args, "archives", None):  # scan WHEEL: archives, not an environment
        return
    if args.python:
        args.python_source = "--python"
    elif is_remote(args):
        args.python_source = "python3 on the target"
    else:
        args.python, args.python_source = default_python()


def environment_line(args: argparse.Namespace) -> list[str]:
    """The line that says which interpreter's environment a text report is about."""
    source = getattr(args, "python_source", "")
    paths = getattr(args, "paths", None) or getattr(args, "path", None)
    dists = getattr(args, "dists", None) or getattr(args, "dist", None)
    if not source or (paths and not dists):  # only paths: no environment is inspected
        return []
    python = getattr(args, "python", None) or "archgap's own interpreter"
    return [f"[bold]Python[/] {escape(python)} [dim]({escape(source)})[/]"]


# The commands that inspect a Python environment (the default interpreter applies to them).
LOCAL_ENVIRONMENT = ("scan", "gates", "trace", "explain", "probe", "fix")


def is_remote(args: argparse.Namespace) -> bool:
    """Whether the target options name another machine (its paths are checked there)."""
    return any(getattr(args, k, None) for k in ("host", "container", "pod", "via"))


def request_or_usage_error(sections: list[str], python: str | None) -> dict[str, Any]:
    """The probe request for ``--sections``; an unknown section is a usage error."""
    from archgap.request import UnknownSection, probe_request

    try:
        return probe_request(sections, python)
    except UnknownSection as exc:
        raise UsageError(f"--sections: {exc}") from None


def target_from_args(args: argparse.Namespace) -> Target:
    """The target the options name (``LOCAL`` if none); a bad name raises ``UsageError``."""
    from archgap.transport.target import (
        LOCAL,
        TargetError,
        container_target,
        pod_target,
        ssh_target,
        via_target,
    )

    python = getattr(args, "python", None) or DEFAULT_PYTHON
    try:
        if getattr(args, "host", None):
            return ssh_target(
                args.host, python, getattr(args, "connect_timeout", DEFAULT_CONNECT_TIMEOUT)
            )
        if getattr(args, "container", None):
            return container_target(args.container, python, getattr(args, "container_engine", None))
        if getattr(args, "pod", None):
            return pod_target(args.pod, python)
        if getattr(args, "via", None):
            return via_target(args.via, python)
    except TargetError as exc:
        raise UsageError(str(exc)) from None
    return LOCAL


def check_local_paths(args: argparse.Namespace, paths: list[str]) -> None:
    """Paths on this machine must exist (a remote target's paths are checked there)."""
    remote = is_remote(args)
    missing = [p for p in paths if not remote and not os.path.exists(p)]
    if missing:
        raise UsageError(f"no such file or directory: {', '.join(missing)}")
