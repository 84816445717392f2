"""The probe on every node of a Slurm allocation: one ``srun`` step, one task per node.

``srun --ntasks-per-node=1 --input=all --label [ARGS] PYTHON -I -S -``: srun hands the
same stdin (the bootstrap and the request) to every task and labels each output line with its task
number, so the answer of each node is read back from its own lines.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from archgap.probe.facts import ProbeResponse
from archgap.transport.bootstrap import FACTS_MARKER, probe_input, remote_argv, stdin_payload
from archgap.transport.run import (
    PROBE_FAILED,
    TIMEOUT,
    TRANSPORT_MISSING,
    TransportFailure,
    classify,
    classify_probe,
    fill_python,
    run_command,
    tail,
)
from archgap.transport.target import Target, check_python

_LABELLED = re.compile(r"^\s*(\d+): ?(.*)$")


@dataclass(frozen=True)
class SlurmResult:
    """What one srun step gave: per task, the facts or why not; or a failure of the step."""

    tasks: tuple[tuple[str, ProbeResponse | TransportFailure], ...]  # (node or "task N", result)
    error: TransportFailure | None = None


def srun_argv(srun_args: list[str], python: str) -> list[str]:
    head = ["srun", "--ntasks-per-node=1", "--input=all", "--label", "--kill-on-bad-exit=0"]
    return [*head, *srun_args, *remote_argv(check_python(python))]


def split_labelled(text: str) -> dict[int, str]:
    per_task: dict[int, list[str]] = {}
    for line in text.splitlines():
        match = _LABELLED.match(line)
        if match:
            per_task.setdefault(int(match.group(1)), []).append(match.group(2))
    # srun cuts long lines into 1 KiB pieces, each labelled: the facts line (JSON has no raw
    # newline) is glued back together from the marker to the task's last line.
    joined: dict[int, str] = {}
    for task, lines in per_task.items():
        marks = [i for i, line in enumerate(lines) if line.startswith(FACTS_MARKER)]
        if marks:
            lines = [*lines[: marks[-1]], "".join(lines[marks[-1] :])]
        joined[task] = "\n".join(lines)
    return joined


def run_probe_slurm(
    srun_args: list[str],
    request: dict[str, Any],
    python: str = "python3",
    timeout: float = 300.0,
) -> SlurmResult:
    """Run the probe once per node with srun and read one facts document per node."""
    argv = srun_argv(srun_args, python)
    payload = stdin_payload(probe_input(fill_python(request, python)))
    code, out, err, error = run_command(argv, payload, timeout)
    if error == "timeout":
        return SlurmResult(
            (), TransportFailure(TIMEOUT, f"srun gave no answer within {timeout:g} s", tail(err))
        )
    if error is not None or code is None:
        return SlurmResult((), TransportFailure(TRANSPORT_MISSING, error or "srun could not start"))
    outs, errs = split_labelled(out), split_labelled(err)
    tasks: list[tuple[str, ProbeResponse | TransportFailure]] = []
    for task in sorted(set(outs) | set(errs)):
        target = Target("via", f"task {task}", ("srun",), python)
        result = classify_probe(target, 0, outs.get(task, ""), errs.get(task, ""))
        if isinstance(result, ProbeResponse):
            tasks.append((result.host or f"task {task}", result))
        else:
            tasks.append((f"task {task}", result))
    if not tasks:
        failure = classify(Target("via", "srun", ("srun",), python), code or 1, out, err)
        if not isinstance(failure, TransportFailure):
            failure = TransportFailure(PROBE_FAILED, f"srun exited with status {code}", tail(err))
        return SlurmResult((), failure)
    return SlurmResult(tuple(tasks))


# --- draining a node (archgap scan --health --drain) ----------------------------------------
#
# A health check runs on every node every HealthCheckInterval: at 10,000 nodes even one
# controller RPC per healthy check is a burst of 10,000. So a node keeps, in a local record, what
# archgap last left it as ("clear" or "drained"); a healthy check on a clear node asks nothing.
# The controller is asked (``scontrol show node``: one RPC) only when the record is missing
# (first check after a reboot) or says drained, and on a gap; it is told only to change a state.

SCONTROL_TIMEOUT = 20.0
STATE_DIR = "/run/archgap"  # ARCHGAP_STATE_DIR overrides; gone at reboot, which is the point
_REASON = re.compile(r"^\s*Reason=(.*?)(?:\s+\[[^]]*@[^]]*\])?\s*$", re.M)  # "[user@time]"
_STATE = re.compile(r"^\s*State=(\S+)", re.M)


def _scontrol(args: list[str]) -> tuple[bool, str]:
    """(succeeded, output or why not) of one ``scontrol`` call."""
    code, out, err, error = run_command(["scontrol", *args], b"", SCONTROL_TIMEOUT)
    if error is not None:
        return False, error
    if code != 0:
        why = tail(err or out, 3).strip()
        return False, f"scontrol {args[0]} exited with status {code}: {why}"
    return True, out


def node_state(node: str) -> tuple[str, str] | str:
    """(state flags, reason) of a node as the controller has them ("IDLE+DRAIN",
    "archgap: ..."; reason "" when none), or why it could not tell. One RPC."""
    ok, text = _scontrol(["show", "node", node])
    if not ok:
        return text
    state = _STATE.search(text)
    if state is None:
        return f"scontrol does not know node {node}"
    reason = _REASON.search(text)
    return state.group(1), reason.group(1) if reason else ""


def drain_node(node: str, reason: str) -> str | None:
    """``scontrol update NodeName=NODE State=DRAIN Reason=REASON``; None, or why it failed."""
    ok, text = _scontrol(["update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"])
    return None if ok else text


def _record_path(node: str, environ: Mapping[str, str]) -> str:
    directory = environ.get("ARCHGAP_STATE_DIR") or STATE_DIR
    return os.path.join(directory, "slurm-" + re.sub(r"[^A-Za-z0-9._-]", "_", node))


def _read_record(node: str, environ: Mapping[str, str]) -> str:
    try:
        with open(_record_path(node, environ), encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return ""


def _write_record(node: str, environ: Mapping[str, str], value: str) -> None:
    """Best effort: without a record (an unprivileged job step) every check asks once."""
    path = _record_path(node, environ)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(value + "\n")
        os.replace(path + ".tmp", path)
    except OSError:
        pass


def sync_drain(
    node: str, reason: str | None, prefix: str, environ: Mapping[str, str]
) -> str | None:
    """Make the node's state follow a health result: ``reason`` (a gap) drains it with that
    reason unless it already is; None (OK) resumes it if archgap drained it (a reason that
    starts with ``prefix``; anyone else's drain stays). None, or why it could not."""
    if reason is None and _read_record(node, environ) == "clear":
        return None
    state = node_state(node)
    if isinstance(state, str):
        return state
    flags, current = state
    drained = "DRAIN" in flags.upper()
    problem: str | None = None
    if reason is not None:
        if not (drained and current == reason):
            problem = drain_node(node, reason)
    elif drained and current.startswith(prefix):
        ok, text = _scontrol(["update", f"NodeName={node}", "State=RESUME"])
        problem = None if ok else text
    if problem is None:
        _write_record(node, environ, "clear" if reason is None else "drained")
    return problem
