"""System.run: commands are argument vectors with a hard timeout; failures are values."""

import time
from pathlib import Path

from archgap.probe.environment.system import System, env_allowed


def test_timeout_kills_the_whole_process_group() -> None:
    # The grandchild keeps stdout open: waiting for EOF after killing only the shell would hang.
    started = time.monotonic()
    result = System.local().run(["sh", "-c", "sleep 30 & sleep 30"], timeout=1)
    assert time.monotonic() - started < 6
    assert result.error == "timed out after 1 s" and result.returncode is None


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
