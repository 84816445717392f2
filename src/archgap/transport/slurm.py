"""The probe on every node of a Slurm allocation: one ``srun`` step, one task per node.

``srun --ntasks-per-node=1 --input=all --label [ARGS] PYTHON -I -S -c LOADER``: srun hands the
same stdin (the bootstrap and the request) to every task and labels each output line with its task
number, so the answer of each node is read back from its own lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from archgap.transport.bootstrap import FACTS_MARKER, probe_input, remote_argv, stdin_payload
from archgap.transport.run import (
    PROBE_FAILED,
    TIMEOUT,
    TRANSPORT_MISSING,
    TransportError,
    classify,
    fill_python,
    run_command,
    tail,
)
from archgap.transport.target import Target, check_python

_LABELLED = re.compile(r"^\s*(\d+): ?(.*)$")


@dataclass(frozen=True)
class SlurmResult:
    """What one srun step gave: per task, the facts or why not; or a failure of the step."""

    tasks: tuple[tuple[str, dict[str, Any] | TransportError], ...]  # (node or "task N", result)
    error: TransportError | None = None


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
            (), TransportError(TIMEOUT, f"srun gave no answer within {timeout:g} s", tail(err))
        )
    if error is not None or code is None:
        return SlurmResult((), TransportError(TRANSPORT_MISSING, error or "srun could not start"))
    outs, errs = split_labelled(out), split_labelled(err)
    tasks: list[tuple[str, dict[str, Any] | TransportError]] = []
    for task in sorted(set(outs) | set(errs)):
        target = Target("via", f"task {task}", ("srun",), python)
        result = classify(target, 0, outs.get(task, ""), errs.get(task, ""))
        if isinstance(result, dict):
            tasks.append((str(result.get("host") or f"task {task}"), result))
        else:
            tasks.append((f"task {task}", result))
    if not tasks:
        failure = classify(Target("via", "srun", ("srun",), python), code or 1, out, err)
        if not isinstance(failure, TransportError):
            failure = TransportError(PROBE_FAILED, f"srun exited with status {code}", tail(err))
        return SlurmResult((), failure)
    return SlurmResult(tuple(tasks))
