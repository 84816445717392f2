"""System.run: commands are argument vectors with a hard timeout; failures are values."""

import os
import signal
from pathlib import Path

import pytest

from archgap.probe.environment.envvars import env_allowed
from archgap.probe.environment.system import System
from tests.hangs import Sleeper


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    # The background sleep keeps stdout open: waiting for EOF after killing only the shell would
    # wait for its end (the marker), and killing only the shell would leave it running.
    sleeper = Sleeper(tmp_path)
    result = System.local().run(["sh", "-c", sleeper.shell()], timeout=1)
    assert result.error == "timed out after 1 s" and result.returncode is None
    sleeper.assert_cut_short()


def test_failures_are_values(tmp_path: Path) -> None:
    system = System.local()
    assert system.run([str(tmp_path / "nope")]).error == "not found"
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\n")
    assert system.run([str(script)]).error == "permission denied"
    failed = system.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (failed.returncode, failed.stdout, failed.stderr) == (3, "out\n", "err\n")
    assert failed.error == "exited with status 3" and not failed.ok
    assert system.run(["sh", "-c", "kill -SEGV $$"]).error == "killed by signal 11"


def test_arguments_are_never_a_shell_string(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    result = System.local().run(["echo", f"; touch {canary}", f"$(touch {canary})"])
    assert result.ok and not canary.exists()


def test_only_allowlisted_variables_are_read() -> None:
    system = System.local(environ={"CUDA_HOME": "/c", "HF_TOKEN": "x", "VLLM_API_KEY": "k"})
    assert system.environ == {"CUDA_HOME": "/c"}
    assert not env_allowed("FLASHINFER_SECRET") and env_allowed("FLASHINFER_CUDA_ARCH_LIST")


def test_system_paths_go_through_the_root_prefix(tmp_path: Path) -> None:
    assert System.local(root=str(tmp_path)).path("/proc/x") == str(tmp_path / "proc" / "x")
    assert System.local().path("/proc/x") == "/proc/x"


def test_a_timed_out_tree_is_stopped_whole_before_any_of_it_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A shell that waits on a child runs on the moment that child dies (`wait; touch marker`):
    # killed one by one in a set's order, the child first, the shell could still act (a busy
    # machine preempts the killer between two kills). SIGSTOP cannot be caught: once every process
    # of the tree has it, none runs again, whatever order SIGKILL then comes in.
    sent: list[tuple[int, int]] = []
    real_kill = os.kill

    def recording_kill(pid: int, sig: int) -> None:
        sent.append((pid, sig))
        real_kill(pid, sig)

    monkeypatch.setattr(os, "kill", recording_kill)
    sleeper = Sleeper(tmp_path)
    result = System.local().run(["sh", "-c", sleeper.shell()], timeout=1)
    assert result.error == "timed out after 1 s"
    sleeper.assert_cut_short()
    kills = [i for i, (_pid, sig) in enumerate(sent) if sig == signal.SIGKILL]
    stops = {pid for pid, sig in sent[: kills[0]] if sig == signal.SIGSTOP} if kills else set()
    # every process the sleeper recorded (the shell and its sleep) was stopped before the first kill
    assert kills and stops and set(sleeper.pids()) <= stops, sent
