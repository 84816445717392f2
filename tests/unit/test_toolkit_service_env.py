"""--env-from: a service's environment from an env file, `docker inspect` JSON or a real
/proc/PID/environ; only allowlisted variables are kept."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from archgap.probe.environment.service_env import parse_env_file, system_with_env_from
from archgap.probe.environment.system import System
from tests.toolkit_stubs import wait_for_exec


def test_env_file_lines(tmp_path: Path) -> None:
    env_file = tmp_path / "sglang.env"
    env_file.write_text(
        "# service environment\n"
        "export CUDA_HOME=/usr/local/cuda-12.8\n"
        'FLASHINFER_CUDA_ARCH_LIST="12.0a 9.0a"\n'
        "PATH=/usr/local/cuda-12.8/bin:/usr/bin # inline comment\n"
        "HF_TOKEN=hf_secret\n"
        "AWS_SECRET_ACCESS_KEY=nope\n"
        "not a line\n"
    )
    system, why = system_with_env_from(str(env_file), System())
    assert why is None and system is not None
    assert system.environ == {
        "CUDA_HOME": "/usr/local/cuda-12.8",
        "FLASHINFER_CUDA_ARCH_LIST": "12.0a 9.0a",
        "PATH": "/usr/local/cuda-12.8/bin:/usr/bin",
    }
    assert system.env_source == str(env_file)


def test_docker_inspect_json(tmp_path: Path) -> None:
    doc = [{"Id": "abc", "Config": {"Env": ["CUDA_HOME=/usr/local/cuda", "API_KEY=x", "A=b"]}}]
    path = tmp_path / "inspect.json"
    path.write_text(json.dumps(doc))
    system, why = system_with_env_from(str(path), System())
    assert why is None and system is not None
    assert system.environ == {"CUDA_HOME": "/usr/local/cuda"}
    assert "docker inspect" in system.env_source


def test_real_proc_environ_of_a_started_process(tmp_path: Path) -> None:
    env = {"CUDA_HOME": "/opt/cuda-12.8", "PATH": "/usr/bin:/bin", "GITHUB_TOKEN": "ghp_x"}
    proc = subprocess.Popen(["sleep", "30"], env=env)
    try:
        wait_for_exec(proc.pid)
        system, why = system_with_env_from(str(proc.pid), System())
    finally:
        proc.kill()
        proc.wait()
    assert why is None and system is not None
    assert system.environ == {"CUDA_HOME": "/opt/cuda-12.8", "PATH": "/usr/bin:/bin"}
    assert system.env_source == f"/proc/{proc.pid}/environ"


def test_bad_sources_are_reasons_not_exceptions(tmp_path: Path) -> None:
    assert system_with_env_from(str(tmp_path / "missing.env"), System())[1]
    assert "no process" in (system_with_env_from("999999999", System())[1] or "")
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    assert "does not parse" in (system_with_env_from(str(bad), System())[1] or "")
    text = tmp_path / "junk.env"
    text.write_text("just words\n")
    assert "not an env file" in (system_with_env_from(str(text), System())[1] or "")


def test_quotes_and_empty_values() -> None:
    env, bad = parse_env_file("A='x y'\nB=\nexport  C=\"1\"\n")
    assert env == {"A": "x y", "B": "", "C": "1"} and not bad
