"""The probe on every node of a Slurm allocation: one ``srun`` step, one task per node.

``srun --ntasks-per-node=1 --input=all --label --verbose [ARGS] PYTHON -I -S -``: srun hands
the same stdin (the bootstrap and the request) to every task and labels each output line with its
task number, so the answer of each node is read back from its own lines; its verbose lines say
which node runs which task ("launching StepId=7.0 on host gpu017, 1 tasks: 3"), so each host is
named by its Slurm NodeName, not by what the machine calls itself.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any

from archgap.probe.environment.system import (
    RUN_MARK,
    STDERR_LIMIT,
    new_mark,
    spawn,
    stop_process_group,
)
from archgap.probe.facts import ProbeResponse
from archgap.transport.bootstrap import FACTS_MARKER, probe_input, remote_argv, stdin_payload
from archgap.transport.run import (
    MAX_FACTS_BYTES,
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
from archgap.transport.slurm_nodes import allocation
from archgap.transport.target import Target, check_python

# A node left out of the allocation because Slurm takes no job on it (drained, down).
NODE_UNAVAILABLE = "node-unavailable"

_LABELLED = re.compile(rb"^\s*(\d+): ?(.*)$", re.S)
# Each node's answer is capped on its own (a torch-sized environment is a few MiB of facts);
# nothing is capped across nodes, so a big allocation never fails for its size.
MAX_TASK_BYTES = MAX_FACTS_BYTES
UNLABELLED_LIMIT = STDERR_LIMIT  # srun's own messages (not from a task)
# srun's own line when the allocation it asked for is pending ("srun: job 42 queued and waiting
# for resources"): the job it made, cancelled if srun does not end on SIGTERM.
_QUEUED = re.compile(rb"\bjob (\d+) queued and waiting for resources")
CANCEL_GRACE = 5.0  # how long srun has to revoke its allocation after SIGTERM
# srun --verbose's line for each node it starts tasks on (src/srun/launch.c, slurm_step_launch):
# the node's NodeName and its task ids ("0", "0-3", "0,4").
_LAUNCHING = re.compile(rb"^srun: (?:\S+: )*launching \S+ on host (\S+), \d+ tasks?: ([\d,-]+)\s*$")
# srun --verbose's other lines (its options, plugins, task notifications): not a reason.
_VERBOSE = re.compile(rb"^srun: (?!error:|fatal:|Force Terminated|Job \d+ step creation)")


@dataclass(frozen=True)
class SlurmResult:
    """What one srun step gave: per task, the facts or why not; or a failure of the step."""

    tasks: tuple[tuple[str, ProbeResponse | TransportFailure], ...]  # (node or "task N", result)
    error: TransportFailure | None = None


def srun_argv(srun_args: list[str], python: str) -> list[str]:
    head = ["srun", "--ntasks-per-node=1", "--input=all", "--label", "--kill-on-bad-exit=0", "-v"]
    return [*head, *srun_args, *remote_argv(check_python(python))]


class TaskLines:
    """srun's labelled output (``N: line``) sorted into each task's lines as it streams in, each
    task held to ``limit`` bytes (past it the task is marked over and its further lines are
    dropped), unlabelled lines kept apart up to UNLABELLED_LIMIT."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.lines: dict[int, list[bytes]] = {}
        self.sizes: dict[int, int] = {}
        self.over: set[int] = set()
        self.unlabelled: list[bytes] = []
        self._unlabelled_size = 0
        self._partial = b""

    def feed(self, chunk: bytes) -> None:
        """Add bytes as read from the pipe; b"" at its end."""
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop() if chunk else b""
        for line in lines:
            if line:
                self._line(line)

    def _line(self, line: bytes) -> None:
        match = _LABELLED.match(line)
        if match is None:
            if self._unlabelled_size < UNLABELLED_LIMIT:
                self.unlabelled.append(line)
                self._unlabelled_size += len(line)
            return
        task, text = int(match.group(1)), match.group(2)
        size = self.sizes.get(task, 0) + len(text) + 1
        self.sizes[task] = size
        if size > self.limit:
            self.over.add(task)
            self.lines.pop(task, None)
        elif task not in self.over:
            self.lines.setdefault(task, []).append(text)

    def text(self, task: int) -> str:
        """The task's output; srun cuts long lines into 1 KiB pieces, each labelled, so the facts
        line (JSON has no raw newline) is glued back together from the marker to the end."""
        lines = [line.decode("utf-8", "replace") for line in self.lines.get(task, [])]
        marks = [i for i, line in enumerate(lines) if line.startswith(FACTS_MARKER)]
        if marks:
            lines = [*lines[: marks[-1]], "".join(lines[marks[-1] :])]
        return "\n".join(lines)


def task_nodes(unlabelled: list[bytes]) -> dict[int, str]:
    """Each task's node (its Slurm NodeName) from srun --verbose's launch lines."""
    nodes: dict[int, str] = {}
    for line in unlabelled:
        match = _LAUNCHING.match(line)
        if match is None:
            continue
        node = match.group(1).decode("utf-8", "replace").rstrip(",")
        for part in match.group(2).decode().split(","):
            first, _, last = part.partition("-")
            if first.isdigit() and (not last or last.isdigit()):
                for task in range(int(first), int(last or first) + 1):
                    nodes[task] = node
    return nodes


def split_labelled(text: str) -> dict[int, str]:
    """Each task's output of srun's labelled ``text`` (as TaskLines reads it)."""
    tasks = TaskLines(MAX_TASK_BYTES)
    tasks.feed(text.encode())
    tasks.feed(b"")
    return {task: tasks.text(task) for task in tasks.lines}


def stream_srun(
    argv: list[str], payload: bytes, timeout: float, limit: int = MAX_TASK_BYTES
) -> tuple[int | None, TaskLines, TaskLines, str | None]:
    """(returncode, stdout by task, stderr by task, error) of one srun step; its output is
    sorted per task as it arrives, never hangs past ``timeout``."""
    out, err = TaskLines(limit), TaskLines(STDERR_LIMIT)
    mark = new_mark()
    try:
        proc = spawn(argv, {**os.environ, RUN_MARK: mark.partition("=")[2]}, stdin=True)
    except FileNotFoundError:
        return None, out, err, f"{argv[0]} not found on this machine"
    except OSError as exc:
        return None, out, err, f"cannot run {argv[0]}: {exc.strerror or exc}"
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    writer = threading.Thread(target=_write_all, args=(proc.stdin, payload), daemon=True)
    writer.start()
    deadline = time.monotonic() + timeout
    sinks = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    with selectors.DefaultSelector() as selector:
        for pipe in (proc.stdout, proc.stderr):
            selector.register(pipe, selectors.EVENT_READ)
        try:
            while selector.get_map():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    _cancel(proc, mark, err)
                    return None, out, err, "timeout"
                for key, _ in selector.select(remaining):
                    chunk = os.read(key.fd, 1 << 16)
                    sinks[key.fd].feed(chunk)
                    if not chunk:
                        selector.unregister(key.fileobj)
        except KeyboardInterrupt:  # srun is in a session of its own: Ctrl-C does not reach it
            _cancel(proc, mark, err)
            raise
    try:
        code = proc.wait(max(deadline - time.monotonic(), 0.1))
    except subprocess.TimeoutExpired:
        _cancel(proc, mark, err)
        return None, out, err, "timeout"
    return code, out, err, None


def _cancel(proc: subprocess.Popen[bytes], mark: str, err: TaskLines) -> None:
    """End a step that ran out of time without leaving its allocation behind. srun revokes the
    allocation it is still waiting for (and ends a running step) on SIGTERM; killed outright it
    cannot, and the pending job would later take its nodes. So: SIGTERM first, a short grace, then
    ``scancel`` of the job srun said it queued (a no-op once revoked), then the process group."""
    with contextlib.suppress(OSError):
        proc.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(CANCEL_GRACE)
    for line in err.unlabelled:
        queued = _QUEUED.search(line)
        if queued is not None:
            run_command(["scancel", queued.group(1).decode()], b"", SCONTROL_TIMEOUT)
    stop_process_group(proc, mark)


def _write_all(pipe: IO[bytes], payload: bytes) -> None:
    """The same request to every task (srun --input=all); a step that ends early closes it."""
    try:
        pipe.write(payload)
        pipe.close()
    except OSError:
        pass


def run_probe_slurm(
    srun_args: list[str],
    request: dict[str, Any],
    python: str = "python3",
    timeout: float = 300.0,
    env_from: str | None = None,
) -> SlurmResult:
    """Run the probe once per node with srun and read one facts document per node (judging
    ``env_from``, a file or PID on each node, instead of the environment srun exports).

    Nodes Slurm takes no job on (drained, down: ``slurm_nodes.allocation``) are left out of
    the allocation up front and reported by NodeName with Slurm's reason.

    One node that Slurm cannot start the probe on (its Prolog fails: the node drains and the
    whole step fails) never hides the others: that node is reported with srun's reason, and the
    step is run again on the allocation's other nodes (``--nodes=K --nodelist=...`` after the
    caller's options), as often as another node fails, within ``timeout`` in all."""
    deadline = time.monotonic() + timeout
    # Nodes left out up front (drained, down), then nodes that failed to start or answered in
    # a step that another node's failure ended.
    asked, done = _allocation(srun_args)
    if asked is None:
        return SlurmResult(tuple(done))
    srun_args = args = asked
    while True:
        left_s = deadline - time.monotonic()
        result, nodes, failed = _probe_step(args, (request, env_from), python, left_s, timeout)
        if not failed or not nodes:
            break
        done += [(node, TransportFailure(PROBE_FAILED, f"Slurm: {why}", line))
                 for node, (why, line) in failed.items()]  # fmt: skip
        answered = [(n, r) for n, r in result.tasks if isinstance(r, ProbeResponse)]
        done += answered
        seen = {name for name, _ in done}
        left = [node for node in nodes if node not in seen]
        if not left or deadline - time.monotonic() <= 0:
            return SlurmResult(tuple(done))
        args = [*srun_args, f"--nodes={len(left)}", f"--nodelist={','.join(left)}"]
    return _with_done(done, result)


def _allocation(
    srun_args: list[str],
) -> tuple[list[str] | None, list[tuple[str, ProbeResponse | TransportFailure]]]:
    """The srun options that leave out the nodes Slurm takes no job on (None: no node is left),
    and those nodes as failures."""
    asked, left_out = allocation(list(srun_args), expand_hostlist)
    return asked, [(n.node, TransportFailure(NODE_UNAVAILABLE, n.message)) for n in left_out]


def _with_done(
    done: list[tuple[str, ProbeResponse | TransportFailure]], result: SlurmResult
) -> SlurmResult:
    """The last step's result after the nodes settled before it."""
    if not done:
        return result
    if result.error is not None:
        return SlurmResult((*done, ("slurm", result.error)))
    return SlurmResult((*done, *result.tasks))


# srun --verbose: the nodes of the job it runs the step in ("jobid 7: nodes(3):`n[1-3]', ...").
_JOB_NODES = re.compile(rb"^srun: jobid \d+: nodes\(\d+\):`([^']+)'")
# srun's error for a node it could not start tasks on ("Task launch for StepId=7.0 failed on
# node n2: Job prolog failed").
_LAUNCH_FAILED = re.compile(rb"^srun: error: Task launch for \S+ failed on node ([^:\s]+): (.+)$")


def _probe_step(
    srun_args: list[str],
    asked: tuple[dict[str, Any], str | None],
    python: str,
    left_s: float,
    timeout: float,
) -> tuple[SlurmResult, list[str], dict[str, tuple[str, str]]]:
    """One srun step given ``left_s`` seconds (of ``timeout`` in all) for ``asked`` (the
    request and the --env-from): its result, the nodes of its job (NodeNames) and the nodes
    srun could not start a task on, with the reason and srun's line."""
    request, env_from = asked
    argv = srun_argv(srun_args, python)
    payload = stdin_payload(probe_input(fill_python(request, python), "/", env_from))
    code, outs, errs, error = stream_srun(argv, payload, max(left_s, 0.1))
    job_nodes: list[str] = []
    failed: dict[str, tuple[str, str]] = {}
    for line in errs.unlabelled:
        listed, refused = _JOB_NODES.match(line), _LAUNCH_FAILED.match(line)
        if listed is not None:
            job_nodes = expand_hostlist(listed.group(1).decode("utf-8", "replace"))
        elif refused is not None:
            node, why = (g.decode("utf-8", "replace") for g in refused.groups())
            failed[node] = (why, line.decode("utf-8", "replace"))
    return _read_step(code, outs, errs, error, python, timeout), job_nodes, failed


def expand_hostlist(hostlist: str) -> list[str]:
    """Slurm's hostlist (``n[1-3,7],login``) as node names, by ``scontrol show hostnames`` (no
    controller call); [] when it cannot."""
    code, out, _err, error = run_command(["scontrol", "show", "hostnames", hostlist], b"", 20.0)
    return out.split() if error is None and code == 0 else []


def _read_step(
    code: int | None,
    outs: TaskLines,
    errs: TaskLines,
    error: str | None,
    python: str,
    timeout: float,
) -> SlurmResult:
    """Each task's facts (or failure) of one srun step, named by its node; or the step's
    failure."""
    nodes = task_nodes(errs.unlabelled)
    said = [line for line in errs.unlabelled if not _VERBOSE.match(line)]
    unlabelled = b"\n".join(said).decode("utf-8", "replace")
    if error == "timeout":
        why = f"srun gave no answer within {timeout:g} s"
        return SlurmResult((), TransportFailure(TIMEOUT, why, tail(unlabelled)))
    if error is not None or code is None:
        return SlurmResult((), TransportFailure(TRANSPORT_MISSING, error or "srun could not start"))
    tasks = [_task_answer(task, nodes, outs, errs, python)
             for task in sorted(set(outs.sizes) | set(errs.sizes))]  # fmt: skip
    if not tasks:
        out = b"\n".join(outs.unlabelled).decode("utf-8", "replace")
        failure = classify(Target("via", "srun", ("srun",), python), code or 1, out, unlabelled)
        if not isinstance(failure, TransportFailure):
            failure = TransportFailure(
                PROBE_FAILED, f"srun exited with status {code}", tail(unlabelled)
            )
        return SlurmResult((), failure)
    return SlurmResult(tuple(tasks))


def _task_answer(
    task: int, nodes: dict[int, str], outs: TaskLines, errs: TaskLines, python: str
) -> tuple[str, ProbeResponse | TransportFailure]:
    """One task's facts or failure, under the NodeName srun started it on."""
    name = nodes.get(task) or f"task {task}"
    if task in outs.over:
        why = f"{name} answered more than {outs.limit} bytes"
        return name, TransportFailure(PROBE_FAILED, why)
    target = Target("via", name, ("srun",), python)
    result = classify_probe(target, 0, outs.text(task), errs.text(task))
    if isinstance(result, ProbeResponse):
        return nodes.get(task) or result.host or name, result
    return name, result


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
