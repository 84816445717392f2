"""Running the probe on a target and telling its failures apart.

``run_probe`` returns the facts (a dict) or a ``TransportFailure`` value: the caller reports it and
goes on with the other hosts. Each run has a total time limit besides ssh's connect timeout; on
expiry the whole process group that archgap started is killed, so nothing lingers.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from archgap.codec import DecodeError, decode
from archgap.probe.environment.system import (
    RUN_MARK,
    communicate,
    new_mark,
    spawn,
    stop_process_group,
)
from archgap.probe.facts import ProbeResponse
from archgap.transport.bootstrap import (
    find_facts,
    find_too_old,
    probe_input,
    remote_argv,
    stdin_payload,
)
from archgap.transport.target import DEFAULT_TIMEOUT, Target

if TYPE_CHECKING:
    from archgap.probe.binary.fatbin import Progress

# Kinds of failure, each with its own message (the JSON contract names them).
UNREACHABLE = "unreachable"
HOST_KEY = "host-key"
AUTH = "auth"
NO_INTERPRETER = "no-interpreter"
TOO_OLD = "interpreter-too-old"
TIMEOUT = "timeout"
PROBE_FAILED = "probe-failed"
TRANSPORT_MISSING = "transport-missing"


@dataclass(frozen=True)
class TransportFailure:
    """Why a target gave no facts: a value, reported next to the hosts that answered."""

    kind: str  # UNREACHABLE, HOST_KEY, AUTH, NO_INTERPRETER, TOO_OLD, TIMEOUT, PROBE_FAILED, ...
    message: str
    stderr: str = ""

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


_UNREACHABLE_SIGNS = (
    "connection refused",
    "connection timed out",
    "timed out during banner exchange",
    "operation timed out",
    "no route to host",
    "network is unreachable",
    "could not resolve hostname",
    "name or service not known",
    "connection closed by",
    "connection reset by",
    "kex_exchange_identification",
)
_HOST_KEY_SIGNS = (
    "host key verification failed",
    "remote host identification has changed",
    "no matching host key type",
)
_NOT_FOUND = re.compile(
    r"(command not found|not found|no such file or directory|executable file not found"
    r"|permission denied)",
    re.IGNORECASE,
)


# The most bytes of facts one target may send (a deep scan of a large site-packages is ~10 MB),
# and of one echoed stderr line.
MAX_FACTS_BYTES = 64 << 20
MAX_ECHOED_LINE = 400


def tail(text: str, lines: int = 20) -> str:
    """The last ``lines`` lines of ``text``, each cut to MAX_ECHOED_LINE characters."""
    kept = text.strip().split("\n")[-lines:]
    return "\n".join(
        line if len(line) <= MAX_ECHOED_LINE else line[:MAX_ECHOED_LINE] + "... (cut)"
        for line in kept
    )


def response(target: Target, data: dict[str, Any]) -> ProbeResponse | TransportFailure:
    """The probe's answer decoded once, here where it enters; one that is not facts is a failure."""
    try:
        return decode(ProbeResponse, data)
    except DecodeError as exc:
        message = f"{target.name}: the probe's answer is malformed: {exc}"
        return TransportFailure(PROBE_FAILED, message)


def classify_probe(
    target: Target, returncode: int, stdout: str, stderr: str
) -> ProbeResponse | TransportFailure:
    """The probe's answer, decoded, or the failure that the exit status and the output point to."""
    result = classify(target, returncode, stdout, stderr)
    return result if isinstance(result, TransportFailure) else response(target, result)


def classify(
    target: Target, returncode: int, stdout: str, stderr: str
) -> dict[str, Any] | TransportFailure:
    """The answer (facts or the fixer's), or the failure the exit status and output point to."""
    facts = find_facts(stdout)
    if facts is not None and returncode == 0:
        return facts
    too_old = _too_old(target, stdout, stderr.lower())
    if too_old is not None:
        return too_old
    if _uses_ssh(target) and returncode == 255:
        return _ssh_failure(target, stderr)
    return _exit_failure(target, returncode, stdout, stderr)


def _too_old(target: Target, stdout: str, lowered: str) -> TransportFailure | None:
    """The interpreter is too old for the probe (its marker line, or no ``-I`` option)."""
    too_old = find_too_old(stdout)
    if too_old is not None:
        return TransportFailure(
            TOO_OLD, f"{target.python} on {target.name} is Python {too_old}; the probe needs >= 3.8"
        )
    if "unknown option: -i" in lowered or "unknown option -i" in lowered:
        return TransportFailure(
            TOO_OLD,
            f"{target.python} on {target.name} has no -I option (Python 2?); need >= 3.8",
        )
    return None


def _uses_ssh(target: Target) -> bool:
    return target.kind == "ssh" or bool(
        target.prefix and os.path.basename(target.prefix[0]) == "ssh"
    )


def _ssh_failure(target: Target, stderr: str) -> TransportFailure:
    """ssh's own failure (status 255): the host key, authentication, or the host unreachable."""
    lowered = stderr.lower()
    first = tail(stderr, 1) or "exit status 255"
    if any(sign in lowered for sign in _HOST_KEY_SIGNS):
        return TransportFailure(
            HOST_KEY,
            f"{target.name}: host key not known or changed (check known_hosts): {first}",
            tail(stderr),
        )
    if "permission denied" in lowered or "too many authentication failures" in lowered:
        return TransportFailure(
            AUTH, f"{target.name}: authentication refused: {first}", tail(stderr)
        )
    if any(sign in lowered for sign in _UNREACHABLE_SIGNS) or not lowered.strip():
        return TransportFailure(UNREACHABLE, f"{target.name}: {first}", tail(stderr))
    return TransportFailure(UNREACHABLE, f"{target.name}: ssh failed: {first}", tail(stderr))


def _exit_failure(target: Target, returncode: int, stdout: str, stderr: str) -> TransportFailure:
    """The probe's command ended without facts: no such interpreter, or the probe failed."""
    first = tail(stderr, 1) or f"exit status {returncode}"
    # 126/127: the shell (or env, docker, kubectl) found no runnable interpreter of that name.
    if returncode in (126, 127) or (
        returncode != 0 and target.python in stderr and _NOT_FOUND.search(stderr)
    ):
        return TransportFailure(
            NO_INTERPRETER,
            f"no interpreter {target.python!r} on {target.name}: {first}",
            tail(stderr),
        )
    if returncode == 0:
        return TransportFailure(
            PROBE_FAILED, f"{target.name}: the probe printed no facts", tail(stderr or stdout)
        )
    return TransportFailure(
        PROBE_FAILED, f"{target.name}: the probe failed ({first})", tail(stderr, 40)
    )


def run_command(
    argv: list[str], stdin: bytes, timeout: float
) -> tuple[int | None, str, str, str | None]:
    """(returncode, stdout, stderr, error) of one command; never hangs past ``timeout`` and
    never holds more than MAX_FACTS_BYTES of its output (error "output over N bytes")."""
    mark = new_mark()
    try:
        # Its own process group (a timeout kills ssh and its children), marked so that a
        # timeout also finds its setsid'd descendants.
        proc = spawn(argv, {**os.environ, RUN_MARK: mark.partition("=")[2]}, stdin=True)
    except FileNotFoundError:
        return None, "", "", f"{argv[0]} not found on this machine"
    except OSError as exc:
        return None, "", "", f"cannot run {argv[0]}: {exc.strerror or exc}"
    out, err, stopped = communicate(proc, stdin, timeout, MAX_FACTS_BYTES)
    if stopped is not None:
        stop_process_group(proc, mark)
        return None, "", err.decode("utf-8", "replace"), stopped
    return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), None


def fill_python(request: dict[str, Any], python: str) -> dict[str, Any]:
    """Sections that inspect "the" interpreter mean the target's ``--python`` on a remote host.

    Under ``-I -S`` a venv's interpreter does not know its own venv, so a section parameter
    ``"python": None`` becomes the interpreter path, which the probe resolves through pyvenv.cfg.
    """
    filled: dict[str, Any] = {}
    for name, params in request.items():
        if isinstance(params, dict) and "python" in params and params["python"] is None:
            params = {**params, "python": python}
        filled[name] = params
    return filled


def run_probe(
    target: Target,
    request: dict[str, Any],
    timeout: float = DEFAULT_TIMEOUT,
    root: str = "/",
    env_from: str | None = None,
    progress: Progress | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> ProbeResponse | TransportFailure:
    """The facts ``request`` asks for, collected on ``target`` by the same probe code as locally;
    ``progress`` is told as the binaries are read (on this machine only). ``meanwhile`` is work
    of the caller's that a local probe may overlap (``local.local_facts``); it runs either way."""
    if target.is_local:
        from archgap.transport.local import local_facts

        probe_in = probe_input(request, root, env_from, timeout)
        return response(target, local_facts(probe_in, progress, meanwhile))
    if meanwhile is not None:
        meanwhile()
    payload = stdin_payload(
        probe_input(fill_python(request, target.python), root, env_from, timeout)
    )
    started = time.monotonic()
    code, out, err, error = run_command(
        target.command(remote_argv(target.python)), payload, timeout
    )
    if error == "timeout":
        elapsed = time.monotonic() - started
        return TransportFailure(
            TIMEOUT,
            f"{target.name}: no answer within {elapsed:.0f} s (--timeout {timeout:g})",
            tail(err),
        )
    if error is not None and error.startswith("output over"):
        message = f"{target.name}: the answer was cut: {error}"
        return TransportFailure(PROBE_FAILED, message, tail(err))
    if error is not None or code is None:
        return TransportFailure(TRANSPORT_MISSING, error or "could not start", "")
    return classify_probe(target, code, out, err)


def run_many(
    targets: Iterable[Target],
    request: dict[str, Any],
    jobs: int = 16,
    timeout: float = DEFAULT_TIMEOUT,
    env_from: str | None = None,
) -> Iterator[tuple[Target, ProbeResponse | TransportFailure]]:
    """Probe many targets, at most ``jobs`` at a time; yields each as it answers."""
    target_list = list(targets)
    from concurrent.futures import ThreadPoolExecutor, as_completed  # fleets only

    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(target_list) or 1))) as pool:
        futures = {
            pool.submit(run_probe, t, request, timeout, "/", env_from): t for t in target_list
        }
        for future in as_completed(futures):
            # Popped: a host's facts are held only until the caller has judged them.
            yield futures.pop(future), future.result()


def run_fixer(
    target: Target, fix_request: dict[str, Any], timeout: float = DEFAULT_TIMEOUT
) -> dict[str, Any] | TransportFailure:
    """The fix program's answer (probe/fixer.py: plan, apply, undo) from ``target``; it travels
    and runs exactly like the probe (the same loader, the same in-memory package)."""
    if target.is_local:
        from archgap.probe.actions.fixer import run

        answer: dict[str, Any] = json.loads(json.dumps(run(fix_request)))
        return answer
    payload = stdin_payload({"fix": fix_request})
    code, out, err, error = run_command(
        target.command(remote_argv(target.python)), payload, timeout
    )
    if error is not None or code is None:
        kind = TIMEOUT if error == "timeout" else TRANSPORT_MISSING
        return TransportFailure(kind, f"{target.name}: {error or 'could not start'}", tail(err))
    return classify(target, code, out, err)
