"""Structural checks that a timeout cut a hang short, in place of bounds on elapsed seconds (on a
busy machine any bound on seconds fails now and then, and proves little when it passes).

A stand-in for a hanging program (``Sleeper``) records the pid of each of its processes, then
sleeps far longer than any timeout under test and, if it ever wakes, leaves a marker. The claim
"the call stopped it instead of waiting for it" is then: the call returned while the marker is
absent, and every recorded process is gone afterwards without having left it.
"""

from __future__ import annotations

import time
from pathlib import Path

# A hang guard, not a timing claim: how long a process that was sent SIGKILL may take to be gone
# (milliseconds, normally). Shorter than SLEEP, so a sleeper nobody stopped is still running when
# it expires and fails the check.
GUARD = 120.0
SLEEP = 300  # how long a Sleeper sleeps before it leaves its marker


def alive(pid: int) -> bool:
    """Running or sleeping (a zombie waiting for its new parent to reap it counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def gone(pid: int, guard: float = GUARD) -> bool:
    """Whether process ``pid`` has ended (or is a zombie), waiting up to ``guard`` seconds for a
    process already sent SIGKILL to finish dying."""
    deadline = time.monotonic() + guard
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def started(path: Path, guard: float = GUARD) -> str:
    """The text of ``path`` once a process has written it (a hang guard for a process that never
    starts); fails with a clear message after ``guard`` seconds."""
    deadline = time.monotonic() + guard
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"nothing wrote {path} within {guard:g} s"
        time.sleep(0.02)
    return path.read_text()


class Sleeper:
    """A shell program that records its pids in ``pids`` (the shell's, then a background
    ``sleep``'s that holds the shell's stdout and stderr), sleeps ``seconds``, then writes
    ``marker``."""

    def __init__(self, where: Path, seconds: int = SLEEP) -> None:
        where.mkdir(parents=True, exist_ok=True)
        self.pid_file = where / "sleeper.pids"
        self.marker = where / "sleeper.woke"
        self.seconds = seconds

    def shell(self) -> str:
        """The program's shell text (for ``sh -c`` or the body of a ``#!/bin/sh`` script); it
        quotes with double quotes only, so it fits in a single-quoted ``sh -c '...'``."""
        return (
            f'echo $$ >> "{self.pid_file}"; sleep {self.seconds} & echo $! >> "{self.pid_file}"; '
            f'wait; touch "{self.marker}"'
        )

    def script(self, path: Path) -> Path:
        """An executable ``#!/bin/sh`` script at ``path`` that is this program."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n" + self.shell() + "\n")
        path.chmod(0o755)
        return path

    def pids(self) -> list[int]:
        if not self.pid_file.exists():
            return []
        return [int(line) for line in self.pid_file.read_text().split()]

    def assert_cut_short(self) -> None:
        """The call that ran this program has returned: it did not wait for the program's end
        (no marker), and every process of it that started is gone, stopped, not ended by itself.
        (A program killed before its first line ran recorded no pid; nothing of it is left.)"""
        assert not self.marker.exists(), "the call waited for the program to end by itself"
        for pid in self.pids():
            assert gone(pid), f"process {pid} of the program was left running"
        assert not self.marker.exists(), "the program ended by itself: it was not stopped"
