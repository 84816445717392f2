"""The probe on this machine: in this process, or in a forked child while this process works on.

A local scan waits for its probe (the interpreter's answer, NVML, nvcc, the files) and then needs
its analysis, which it has yet to import. With ``meanwhile`` (that work), the probe runs in a
forked child and the two overlap. The child sends frames through a pipe: progress as it reads
files (the parent tells ``progress``, which may draw on the terminal) and, last, the facts as
JSON. Where no child can be forked (not POSIX, other threads here) or the child fails, the probe
runs here, as it does without ``meanwhile``.

Before that, the caller may have the inspected interpreter asked for its paths
(``interpreter_asked_ahead``): a command of ~20 ms, otherwise the first wait of the probe, that
then runs while the caller builds its request.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import struct
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from archgap.probe.binary.fatbin import Progress
    from archgap.probe.forked import Send

FRAME = struct.Struct("<cI")  # kind (PROGRESS or FACTS), bytes that follow
PROGRESS, FACTS = b"p", b"f"
COUNTS = struct.Struct("<II")  # a progress frame: files done, files in all; then the path


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


def local_facts(
    probe_in: dict[str, Any],
    progress: Progress | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> dict[str, Any]:
    """The facts of ``probe_in`` collected on this machine, through JSON, so that they have
    exactly the shape remote ones have (lists, not tuples)."""
    from archgap.probe.__main__ import run
    from archgap.probe.forked import fork_safe, in_two_processes

    if meanwhile is not None and fork_safe():
        frames = _Frames(progress)

        def child(send: Send) -> bytes:
            def tell(done: int, total: int, path: str) -> None:
                send(_frame(PROGRESS, COUNTS.pack(done, total) + os.fsencode(path)))

            facts = run(probe_in, tell if progress is not None else None)
            return _frame(FACTS, json.dumps(facts).encode())

        _, sent = in_two_processes(child, meanwhile, frames.hear)
        if sent is not None and frames.facts is not None:
            return frames.facts
    elif meanwhile is not None:
        meanwhile()
    return json.loads(json.dumps(run(probe_in, progress)))  # type: ignore[no-any-return]


@contextlib.contextmanager
def interpreter_asked_ahead(python: str | None, root: str, timeout: float) -> Iterator[None]:
    """While the block runs, a thread asks ``python`` for its paths (``pyenv.interpreter_paths``)
    as a probe of this machine (``root``, ``timeout``, the shell's environment) would; the block
    is left once the answer is in (no fork from a process with other threads). The answer is
    kept where that probe looks for it, in this process and in a child forked from it; whatever
    goes wrong only means the probe asks itself. Nothing is asked of this interpreter (its
    paths need no command)."""
    if not python:
        yield
        return
    from archgap.probe.__main__ import system_of
    from archgap.probe.environment.pyenv import interpreter_paths
    from archgap.transport.bootstrap import probe_input

    system = system_of(probe_input({}, root, None, timeout))  # as the probe's payload says

    def ask() -> None:
        with contextlib.suppress(Exception):
            interpreter_paths(system, python)

    thread = threading.Thread(target=ask, name="archgap-interpreter", daemon=True)
    thread.start()
    yield
    # Not after an exception (Ctrl-C): that would wait for a hanging interpreter; a thread still
    # running only means the probe is not forked (fork_safe).
    thread.join()


def _frame(kind: bytes, payload: bytes) -> bytes:
    return FRAME.pack(kind, len(payload)) + payload


class _Frames:
    """The child's frames as its bytes arrive: progress is told at once, the facts kept."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.pending = bytearray()
        self.facts: dict[str, Any] | None = None

    def hear(self, chunk: bytes) -> None:
        self.pending += chunk
        while len(self.pending) >= FRAME.size:
            kind, size = FRAME.unpack_from(self.pending)
            end = FRAME.size + size
            if len(self.pending) < end:
                return
            payload = bytes(self.pending[FRAME.size : end])
            del self.pending[:end]
            if kind == FACTS:
                self.facts = json.loads(payload)
            elif kind == PROGRESS and self.progress is not None:
                done, total = COUNTS.unpack_from(payload)
                self.progress(done, total, os.fsdecode(payload[COUNTS.size :]))
