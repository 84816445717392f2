"""archgap scan, kernels, trace and gates over real ssh: the remote files and environment decide.

The test sshd host alpha sets CUDA_HOME to a toolkit whose nvcc prints the recorded 12.8 banner
(scripts/services); beta sets a 12.9 one. With flashinfer-python 0.6.8 and an RTX PRO 6000 the
incident (FlashInfer's "SM 12.x requires CUDA >= 12.9" swallowed into "requires GPUs with sm75 or
higher") is predicted on alpha, not on beta: the shell running archgap has neither setting.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import DATA, json_output, run_cli
from tests.integration.test_remote_services import leftovers, require, snapshot, ssh_env

VENV_068 = DATA / "venv-flashinfer-python-0.6.8" / "bin" / "python"


def remote_scan(host: str) -> tuple[int, dict[str, Any]]:
    if not VENV_068.exists():
        pytest.skip("scripts/testdata has not installed the flashinfer venvs")
    args = ("scan", "--host", host, "--python", str(VENV_068), "--gpu", "RTX PRO 6000", "--json")
    result = run_cli(*args, env=ssh_env(), timeout=120)
    return result.returncode, json_output(result, "scan")


def test_incident_predicted_on_the_host_whose_cuda_home_is_12_8() -> None:
    hosts = require("ssh")["hosts"]
    before = snapshot(*(h[k] for h in hosts.values() for k in ("tmpdir", "home")))
    code, alpha = remote_scan("alpha")
    (finding,) = [f for f in alpha["jit"] if f["package"] == "flashinfer-python"]
    assert finding["status"] == "fails"
    assert "sm75 or higher" in finding["error"]
    assert hosts["alpha"]["env"]["CUDA_HOME"] in str(finding)
    assert code == 1
    assert alpha["python"]["executable"] == str(VENV_068)
    assert leftovers(before) == {}


def test_no_finding_where_nvcc_is_12_9() -> None:
    code, beta = remote_scan("beta")
    assert [f for f in beta["jit"] if f["status"] == "fails"] == []
    assert code == 0


def test_unreachable_host_is_a_probe_error() -> None:
    require("ssh")
    result = run_cli("scan", "--host", "root@127.0.0.1:1", "--gpu", "12.0", env=ssh_env())
    assert result.returncode == 2
    assert "unreachable" in result.stderr and "Traceback" not in result.stderr
    # ssh's one line is the message: printed once, not again as "stderr" below it.
    assert result.stderr.count("Connection refused") == 1, result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_kernels_on_a_remote_host() -> None:
    # The path is read on the far side; a missing one is a row there, exit 2 here.
    from tests.helpers import CUDA_BIN

    require("ssh")
    libptx = str(CUDA_BIN / "libptxonly.so")
    missing = str(CUDA_BIN / "not-there.so")
    result = run_cli("kernels", "--host", "alpha", libptx, missing, "--json", env=ssh_env())
    doc = json_output(result, "kernels")
    by_path = {f["path"]: f for f in doc["files"]}
    # -gencode arch=compute_80,code=compute_80: PTX only.
    assert {(e["kind"], e["arch"]) for e in by_path[libptx]["entries"]} == {("ptx", 80)}
    assert by_path[missing]["format"] == "unreadable"
    assert result.returncode == 2


def test_trace_and_gates_on_a_remote_host() -> None:
    # Line numbers read off flashinfer-python 0.6.8's compilation_context.py by hand.
    require("ssh")
    if not VENV_068.exists():
        pytest.skip("scripts/testdata has not installed the flashinfer venvs")
    common = ("--host", "alpha", "--python", str(VENV_068), "--json")
    result = run_cli(
        "trace", "TARGET_CUDA_ARCHS", "--dist", "flashinfer-python", *common, env=ssh_env()
    )
    doc = json_output(result, "trace")
    writes = [
        o["line"]
        for o in doc["trace"]["occurrences"]
        if o["kind"] == "write" and o["path"].endswith("flashinfer/compilation_context.py")
    ]
    assert writes == [62, 70, 72, 79]
    assert doc["trace"]["roots"] == ["flashinfer-python 0.6.8"]
    result = run_cli("gates", "flashinfer-python", *common, env=ssh_env(), timeout=300)
    functions = {
        f["function"]
        for t in json_output(result, "gates")["gates"]["targets"]
        for f in t["functions"]
    }
    assert {"check_cuda_arch", "CompilationContext._normalize_cuda_arch"} <= functions
