"""The probe on every node of a Slurm allocation: one ``srun`` step, one task per node.

``srun --ntasks-per-node=1 --input=all --label [ARGS] PYTHON -I -S -``: srun hands the
same stdin (the bootstrap and the request) to every task and labels each output line with its task
number, so the answer of each node is read back from its own lines.
"""

from __future__ import annotations

import re
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

SCONTROL_TIMEOUT = 20.0


def _run(program: str, args: list[str]) -> tuple[bool, str]:
    """(succeeded, output or why not) of one ``scontrol``/``sinfo`` call."""
    code, out, err, error = run_command([program, *args], b"", SCONTROL_TIMEOUT)
    if error is not None:
        return False, error
    if code != 0:
        why = tail(err or out, 3).strip()
        return False, f"{program} {args[0]} exited with status {code}: {why}"
    return True, out


def _scontrol(args: list[str]) -> tuple[bool, str]:
    return _run("scontrol", args)


def node_state(node: str) -> tuple[str, str] | str:
    """(state, reason) of a node as ``sinfo`` reports them ("drained", "archgap: ..."), or why
    it could not (sinfo prints the reason without scontrol's "[user@time]" suffix)."""
    ok, text = _run("sinfo", ["--noheader", "--Node", f"--nodes={node}", "--format=%T|%E"])
    if not ok:
        return text
    first = text.strip().splitlines()[0] if text.strip() else ""
    if "|" not in first:
        return f"sinfo does not know node {node}"
    state, _, reason = first.partition("|")
    return state.strip(), reason.strip()


def drain_node(node: str, reason: str) -> str | None:
    """``scontrol update NodeName=NODE State=DRAIN Reason=REASON``; None, or why it failed."""
    ok, text = _scontrol(["update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"])
    return None if ok else text


def resume_if_drained_by(node: str, prefix: str) -> tuple[bool, str | None]:
    """Resume a node that is draining or drained with a reason that starts with ``prefix``
    (the drain was ours; any other reason is someone else's to lift).

    Returns (resumed, why it could not look or resume).
    """
    state = node_state(node)
    if isinstance(state, str):
        return False, state
    flags, reason = state
    if "drain" not in flags.lower() or not reason.startswith(prefix):
        return False, None
    ok, text = _scontrol(["update", f"NodeName={node}", "State=RESUME"])
    return (True, None) if ok else (False, text)
