"""What every command shares: options, output (rich text or JSON), progress, exit codes."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from archgap.errors import EXIT_ERROR as EXIT_ERROR  # decided by each command's result
from archgap.errors import EXIT_GAP as EXIT_GAP
from archgap.errors import EXIT_OK as EXIT_OK
from archgap.errors import UsageError as UsageError  # one class for the api and the cli
from archgap.report.console import Output as Output
from archgap.report.console import emit_text as emit_text
from archgap.report.console import redact_output as redact_output
from archgap.transport.target import DEFAULT_CONNECT_TIMEOUT

if TYPE_CHECKING:
    from archgap.transport.target import Target


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
        from archgap.transport.local import default_python

        args.python, args.python_source = default_python()


def inspected_python(args: argparse.Namespace) -> str:
    """The interpreter whose environment a source search reads ("" when only paths are)."""
    paths = getattr(args, "paths", None) or getattr(args, "path", None)
    dists = getattr(args, "dists", None) or getattr(args, "dist", None)
    if not getattr(args, "python_source", "") or (paths and not dists):
        return ""
    return getattr(args, "python", None) or "archgap's own interpreter"


# The commands that inspect a Python environment (the default interpreter applies to them;
# explain chooses its own from the log: orchestrate.explain_choice).
LOCAL_ENVIRONMENT = ("scan", "gates", "trace", "probe", "fix")


def is_remote(args: argparse.Namespace) -> bool:
    """Whether the target options name another machine (its paths are checked there)."""
    return any(getattr(args, k, None) for k in ("host", "container", "pod", "via"))


def target_from_args(args: argparse.Namespace) -> Target:
    """The target the options name (``LOCAL`` if none); a bad name is a ``UsageError``."""
    from archgap.transport.target import TARGET_KINDS, named_target

    named = {kind: getattr(args, kind, None) for kind in TARGET_KINDS}
    connect_timeout = getattr(args, "connect_timeout", DEFAULT_CONNECT_TIMEOUT)
    engine = getattr(args, "container_engine", None)
    return named_target(named, getattr(args, "python", None), connect_timeout, engine)
