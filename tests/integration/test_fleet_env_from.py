"""fleet --env-from: every host judges the environment its jobs get (an env file read on that
host), not the shell ssh gives the probe; a host where it cannot be read is a failure.

Real sshd hosts (scripts/services): alpha's sessions get CUDA_HOME=.../cuda-12.8, beta's
CUDA_HOME=.../cuda-12.9 (nvcc stand-ins printing NVIDIA's banners). The environment inspected is
the real flashinfer-python 0.6.8 wheel (scripts/testdata, never imported). Its own rule
(flashinfer/compilation_context.py, ``_normalize_cuda_arch``): ``SM 12.x requires CUDA >= 12.9``;
an RTX PRO 6000 is 12.0, so FlashInfer's JIT fails with nvcc 12.8 and builds with 12.9.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import json_output, run_cli
from tests.integration.test_remote_services import require, ssh_env
from tests.toolkit_stubs import venv_python

RULE = "SM 12.x requires CUDA >= 12.9"


def _python() -> str:
    python = venv_python("venv-flashinfer-python-0.6.8")
    if not python.exists():
        pytest.skip("scripts/testdata has not installed the flashinfer wheels")
    return str(python)


def _fleet(*args: str, json: bool = True) -> tuple[int, Any]:
    result = run_cli(
        "fleet", "--hosts", "alpha,beta", "--python", _python(), "--gpu", "RTX PRO 6000",
        *(("--json",) if json else ()), *args, env={**ssh_env(), "COLUMNS": "300"}, timeout=300,
    )  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json_output(result, "fleet") if json else result.stdout


def _cuda_home(version: str) -> str:
    home = Path(require("ssh")["hosts"]["alpha"]["env"]["CUDA_HOME"]).parent / f"cuda-{version}"
    assert (home / "bin" / "nvcc").is_file(), home
    return str(home)


def _gaps(doc: dict[str, Any]) -> dict[str, bool]:
    return {h["name"]: any(RULE in g for g in h["gaps"]) for h in doc["hosts"]}


def test_each_host_judges_the_env_file_not_its_shell(tmp_path: Path) -> None:
    # The shells differ: alpha's nvcc 12.8 fails FlashInfer's rule, beta's 12.9 passes it.
    code, doc = _fleet()
    assert _gaps(doc) == {"alpha": True, "beta": False} and code == 1
    assert {h["environment"] for h in doc["hosts"]} == {"shell"}
    # The service's EnvironmentFile (on each host; here one filesystem) names nvcc 12.9: both
    # hosts judge it, alpha's shell no longer decides, and nothing fails.
    service = tmp_path / "sglang.env"
    service.write_text(f"# systemd EnvironmentFile\nCUDA_HOME={_cuda_home('12.9')}\n")
    code, doc = _fleet("--env-from", str(service))
    assert _gaps(doc) == {"alpha": False, "beta": False} and code == 0, doc
    assert {h["name"]: h["environment"] for h in doc["hosts"]} == {
        "alpha": str(service),
        "beta": str(service),
    }
    assert [h["env"] for h in doc["hosts"]] == [[f"CUDA_HOME={_cuda_home('12.9')}"]] * 2
    # ... and one naming nvcc 12.8 fails it on both, beta's shell 12.9 notwithstanding.
    service.write_text(f"export CUDA_HOME={_cuda_home('12.8')}\n")
    code, out = _fleet("--env-from", str(service), json=False)
    assert code == 1, out
    assert f"judged in {service}" in out and "alpha,beta (2" in out and RULE in out


def test_a_host_where_the_env_file_cannot_be_read_fails_closed(tmp_path: Path) -> None:
    missing = tmp_path / "gone.env"
    code, doc = _fleet("--env-from", str(missing))
    assert code == 2 and doc["hosts"] == [], doc
    failed = {u["name"]: u for u in doc["unreachable"]}
    assert set(failed) == {"alpha", "beta"}
    for host in failed.values():
        assert host["kind"] == "env-unreadable"
        assert f"cannot read env file {missing}: No such file or directory" in host["message"]
    code, out = _fleet("--env-from", str(missing), json=False)
    assert code == 2 and "env-unreadable" in out and "No such file or directory" in out


def test_env_from_with_documents_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli("fleet", "--from", str(tmp_path), "--env-from", "/etc/sglang.env")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--env-from is read on each probed host" in result.stderr
    # A Ray job's environment is its runtime_env: refused before any cluster is reached.
    ray = run_cli("fleet", "--ray", "127.0.0.1:1", "--env-from", "/etc/sglang.env")
    assert ray.returncode == 2 and "Traceback" not in ray.stderr
    assert "a Ray job's environment is its --runtime-env" in ray.stderr


def test_a_pushed_document_whose_environment_was_unreadable_is_a_failure(tmp_path: Path) -> None:
    """The standalone probe (what the Ansible refresh and other engines run) with an env file
    that is gone writes facts with no sections and the reason (errors.env_from): fleet --from
    reports that host as failed with the reason, never as a host judged on nothing."""
    script = run_cli("probe", "--script", "--env-from", str(tmp_path / "gone.env"))
    assert script.returncode == 0, script.stderr
    (tmp_path / "probe.py").write_text(script.stdout)
    ran = subprocess.run([sys.executable, "-I", str(tmp_path / "probe.py")],
                         capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "node7.json").write_text(ran.stdout)
    result = run_cli("fleet", "--from", str(inbox), "--json")
    doc = json_output(result, "fleet")
    assert result.returncode == 2 and doc["hosts"] == [], doc
    (failed,) = doc["unreachable"]
    assert failed["kind"] == "env-unreadable"
    assert f"cannot read env file {tmp_path / 'gone.env'}" in failed["message"]
