"""Secrets are never read into the facts: an exact allowlist, values checked against what the
variable holds, env sources parsed the way they are written, and --redact for sharing output."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from archgap.probe.environment.envvars import REDACTED
from archgap.probe.environment.service_env import system_with_env_from
from archgap.probe.environment.system import System
from tests.helpers import run_cli
from tests.toolkit_stubs import wait_for_exec
from tests.unit.test_hardening_binaries import within

TOKEN = "ghp_0123456789abcdefABCDEF0123456789abcd"


def env_of(tmp_path: Path, text: str) -> dict[str, str]:
    path = tmp_path / "service.env"
    path.write_text(text)
    system, why = system_with_env_from(str(path), System())
    assert why is None and system is not None
    return system.environ


def test_names_that_only_share_a_prefix_with_toolchain_variables_are_not_read(
    tmp_path: Path,
) -> None:
    names = ("VLLM_PASS", "TORCH_CREDS", "SGLANG_BEARER", "DG_PRIVATE_PEM", "TRITON_cookie")
    wanted = {"TORCH_CUDA_ARCH_LIST": "9.0a;12.0", "FLASHINFER_CUDA_ARCH_LIST": "12.0a"}
    lines = [f"{name}={TOKEN}" for name in names] + [f'{k}="{v}"' for k, v in wanted.items()]
    assert env_of(tmp_path, "\n".join(lines) + "\n") == wanted


def test_an_unquoted_line_with_two_assignments_sets_two_variables(tmp_path: Path) -> None:
    environ = env_of(tmp_path, f"CUDA_PATH=/usr/local/cuda GITHUB_PAT={TOKEN}\n")
    assert environ == {"CUDA_PATH": "/usr/local/cuda"}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CUDA_HOME", TOKEN),
        ("PATH", f"/usr/bin:{TOKEN}"),
        ("CUDA_VISIBLE_DEVICES", TOKEN),
        ("TORCH_CUDA_ARCH_LIST", "9.0 $(curl evil)"),
    ],
)
def test_values_that_do_not_look_like_the_variable_are_redacted(
    tmp_path: Path, name: str, value: str
) -> None:
    assert env_of(tmp_path, f"{name}='{value}'\n") == {name: REDACTED}


def test_a_proc_environ_given_as_a_path_is_nul_separated() -> None:
    env = {"CUDA_HOME": "/opt/cuda-12.8", "PATH": "/usr/bin:/bin", "GITHUB_TOKEN": TOKEN}
    proc = subprocess.Popen(["sleep", "30"], env=env)
    try:
        wait_for_exec(proc.pid)
        system, why = system_with_env_from(f"/proc/{proc.pid}/environ", System())
    finally:
        proc.kill()
        proc.wait()
    assert why is None and system is not None
    assert system.environ == {"CUDA_HOME": "/opt/cuda-12.8", "PATH": "/usr/bin:/bin"}


def test_a_bad_pid_is_a_usage_error_not_the_shell_environment() -> None:
    result = run_cli("probe", "--env-from", "999999999", "--sections", "gpu")
    assert result.returncode == 2
    assert "no process 999999999" in result.stderr
    assert '"sections"' not in result.stdout


def test_a_fifo_env_file_is_refused_without_waiting(tmp_path: Path) -> None:
    path = tmp_path / "env"
    os.mkfifo(path)
    system, why = within(5, lambda: system_with_env_from(str(path), System()))
    assert system is None and why == f"cannot read env file {path}: not a regular file"


def test_deeply_nested_docker_json_is_a_reason(tmp_path: Path) -> None:
    path = tmp_path / "inspect.json"
    path.write_text("[" * 200000)
    system, why = system_with_env_from(str(path), System())
    assert system is None and why is not None and "does not parse" in why


def test_docker_inspect_over_4_mb_is_read(tmp_path: Path) -> None:
    doc = [{"Config": {"Env": ["CUDA_HOME=/usr/local/cuda"], "Labels": {"x": "y" * (5 << 20)}}}]
    path = tmp_path / "inspect.json"
    path.write_text(json.dumps(doc))
    system, why = system_with_env_from(str(path), System())
    assert why is None and system is not None
    assert system.environ == {"CUDA_HOME": "/usr/local/cuda"}


def test_redact_hides_user_names_and_the_host_name(tmp_path: Path) -> None:
    home = "/home/alice-secret"
    result = run_cli(
        "probe", "--redact", "--sections", "gpu", "--json", env={"HOME": home, "PATH": "/usr/bin"}
    )
    assert result.returncode == 0, result.stderr
    assert "alice-secret" not in result.stdout
    facts = json.loads(result.stdout)["facts"]
    assert facts["env"]["HOME"] == "/home/<user>"
    assert facts["host"] == "<host>" != socket.gethostname()
