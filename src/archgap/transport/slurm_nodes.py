"""The nodes a ``fleet --slurm`` allocation leaves out up front: those Slurm will not start a new
job on (DRAIN, DRAINING, DOWN, FAIL, not responding).

Without this, ``srun -N5`` on a partition of five nodes where one is drained waits in the queue
("ReqNodeNotAvail") until ``--timeout``, and the four healthy nodes are never probed. ``sinfo``
(one controller call) names each node of the partition the job would run in with its state and
the reason an operator or a health check gave (``scontrol update ... Reason=``); the unavailable
ones are reported by NodeName with that reason, and srun is asked for the others
(``--exclude``, or a ``--nodelist`` without them, and at most as many nodes as are left).

Inside an existing allocation (``SLURM_JOB_ID`` set: salloc, sbatch) the nodes are already the
job's, and nothing is left out.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from archgap.transport.run import run_command

SINFO_TIMEOUT = 20.0
# sinfo's long state names (sinfo(1), NODE STATE CODES) of a node that takes no new job; a
# trailing "*" is a node not responding. Other suffixes ($ ~ # ! % @ ^ -) are flags.
_UNAVAILABLE_STATES = ("drain", "down", "fail", "inval")
_FORMAT = "%N|%P|%T|%E"  # NodeName, partition (the default one with a "*"), state, reason


@dataclass(frozen=True)
class LeftOut:
    """A node the allocation leaves out: its NodeName, Slurm state and reason."""

    node: str
    state: str
    reason: str

    @property
    def message(self) -> str:
        why = self.reason if self.reason and self.reason != "none" else "no reason given"
        state = self.state.rstrip("*")
        state += ", not responding" if state != self.state else ""
        return f"Slurm: {state} ({why}); left out of the allocation"


def unavailable(state: str) -> bool:
    """Whether a node in sinfo's ``state`` (``drained``, ``down*``, ``idle``) takes no job."""
    lowered = state.lower()
    return lowered.endswith("*") or any(word in lowered for word in _UNAVAILABLE_STATES)


def option_values(args: Sequence[str], short: str, long: str) -> list[str]:
    """The values an srun option is given in ``args``: ``-N3``, ``-N 3``, ``--nodes=3``,
    ``--nodes 3``, in order."""
    values: list[str] = []
    words = list(args)
    for i, word in enumerate(words):
        following = words[i + 1] if i + 1 < len(words) else None
        if word in (short, long) and following is not None:
            values.append(following)
        elif word.startswith(long + "="):
            values.append(word[len(long) + 1 :])
        elif word.startswith(short) and len(word) > len(short) and not word.startswith("--"):
            values.append(word[len(short) :])
    return values


def partition_nodes(
    args: Sequence[str], expand: Callable[[str], list[str]]
) -> list[tuple[str, str, str]] | None:
    """(node, state, reason) of every node the job could run on: its partition's (``-p``, or
    the default partition), within its ``--nodelist``, less its ``--exclude``; None when sinfo
    cannot tell (then nothing is left out: srun says what it says)."""
    partitions = option_values(args, "-p", "--partition")
    argv = ["sinfo", "-h", "-N", "-o", _FORMAT]
    if partitions:
        argv += ["-p", partitions[-1]]
    code, out, _err, error = run_command(argv, b"", SINFO_TIMEOUT)
    if error is not None or code != 0:
        return None
    nodes: dict[str, tuple[str, str, str]] = {}
    for line in out.splitlines():
        fields = line.split("|", 3)
        if len(fields) == 4 and (partitions or fields[1].endswith("*")):
            nodes[fields[0]] = (fields[0], fields[2], fields[3].strip())
    listed = _expanded(option_values(args, "-w", "--nodelist"), expand)
    excluded = set(_expanded(option_values(args, "-x", "--exclude"), expand))
    names = [n for n in (listed if listed else list(nodes)) if n not in excluded]
    return [nodes.get(n, (n, "unknown", "")) for n in names]


def _expanded(values: list[str], expand: Callable[[str], list[str]]) -> list[str]:
    return [node for value in values[-1:] for node in expand(value)]


def allocation(
    args: list[str], expand: Callable[[str], list[str]], environ: Mapping[str, str] | None = None
) -> tuple[list[str] | None, tuple[LeftOut, ...]]:
    """(srun options asking for the nodes that can take a job, or None when none can; the nodes
    left out). ``args`` unchanged when none is left out or Slurm cannot tell."""
    if (os.environ if environ is None else environ).get("SLURM_JOB_ID"):
        return args, ()
    nodes = partition_nodes(args, expand)
    if not nodes:
        return args, ()
    left_out = tuple(LeftOut(n, state, why) for n, state, why in nodes if unavailable(state))
    usable = [n for n, state, _ in nodes if not unavailable(state)]
    if not left_out:
        return args, ()
    if not usable:
        return None, left_out
    return [*args, *_narrowed(args, usable, left_out)], left_out


def _narrowed(args: list[str], usable: list[str], left_out: tuple[LeftOut, ...]) -> list[str]:
    """The options appended (srun takes the last of each) to ask only for ``usable`` nodes."""
    extra: list[str] = []
    if option_values(args, "-w", "--nodelist"):
        extra.append(f"--nodelist={','.join(usable)}")
    else:
        excluded = [*option_values(args, "-x", "--exclude")[-1:], *(n.node for n in left_out)]
        extra.append(f"--exclude={','.join(excluded)}")
    counts = option_values(args, "-N", "--nodes")
    if counts:
        low, _, high = counts[-1].partition("-")
        if low.isdigit() and int(low) > len(usable):
            extra.append(f"--nodes={len(usable)}")
        elif high.isdigit() and int(high) > len(usable):
            extra.append(f"--nodes={low}-{len(usable)}")
    return extra
