"""archgap explain over real ssh: the remote files and the remote environment decide.

The test sshd host alpha sets CUDA_HOME to a toolkit whose nvcc prints the recorded 12.8 banner;
beta sets a 12.9 one and FLASHINFER_CUDA_ARCH_LIST=12.0a; gamma sets neither (scripts/services).
The shell running archgap has none of these, so whatever the answer says about nvcc or the knob
was read on the far side. Expected lines were read off the released flashinfer-python 0.6.8 files
by hand: check_cuda_arch raises at jit/core.py:108 under `if not eligible` (107); in
compilation_context.py the set starts empty at 62, FLASHINFER_CUDA_ARCH_LIST writes at 70/72,
auto-detect write at 79 inside `try` with `except Exception` at 80, and _normalize_cuda_arch raises
"SM 12.x requires CUDA >= 12.9" at 56.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import DATA, FIXTURES, json_output, run_cli
from tests.integration.test_remote_services import leftovers, require, snapshot, ssh_env

VENV_068 = DATA / "venv-flashinfer-python-0.6.8" / "bin" / "python"
LOG = FIXTURES / "explain_corpus" / "sglang-incident-flashinfer-0.6.8.log"
CC = "flashinfer/compilation_context.py"


def _clean_env(**extra: str) -> dict[str, str]:
    """This shell's environment without any CUDA or FlashInfer setting, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_", "FLASHINFER_"))}
    return {**env, **extra}


def explain(*args: str, env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    if not VENV_068.exists():
        pytest.skip("scripts/testdata has not installed the flashinfer venvs")
    common = ("--python", str(VENV_068), "--gpu", "sm_120", "--json", str(LOG))
    result = subprocess.run(
        [sys.executable, "-m", "archgap", "explain", *args, *common],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json_output(result, "explain")["explain"]


def texts(diagnosis: dict[str, Any]) -> str:
    return "\n".join(s["text"] for s in diagnosis["steps"])


def test_incident_chain_over_ssh_is_the_local_chain() -> None:
    hosts = require("ssh")["hosts"]
    before = snapshot(*(h[k] for h in hosts.values() for k in ("tmpdir", "home")))
    code, remote = explain("--host", "alpha", env={**_clean_env(), **ssh_env()})
    assert leftovers(before) == {}
    assert code == 1 and remote["status"] == "diagnosed" and remote["confirmed"] is True
    assert "alpha" in remote["environment"]
    confirmed = [s["location"] for s in remote["steps"] if s["status"] == "confirmed"]
    for location in ("flashinfer/jit/core.py:108", "flashinfer/jit/core.py:107", f"{CC}:62"):
        assert location in confirmed
    assert f"{CC}:79" in confirmed and f"{CC}:63" in confirmed
    steps = texts(remote)
    assert "writes at :70/:72) is not taken" in steps
    assert "raises at :56 and the `except` at :80 swallows it" in steps
    # The nvcc is the one alpha's sshd session names, not anything of the local shell.
    alpha_home = hosts["alpha"]["env"]["CUDA_HOME"]
    assert "12.8 < 12.9" in steps and alpha_home in remote["root_cause"]

    # The same command here, with alpha's CUDA_HOME in the local shell: the same steps.
    code_here, local = explain(env=_clean_env(CUDA_HOME=alpha_home))
    assert code_here == 1 and local["confirmed"] is True
    shape = [(s["location"], s["status"], s["text"]) for s in local["steps"]]
    assert [(s["location"], s["status"], s["text"]) for s in remote["steps"]] == shape
    assert [f["kind"] for f in remote["fixes"]] == [f["kind"] for f in local["fixes"]]


def test_beta_environment_differs_and_the_knob_is_set() -> None:
    require("ssh")
    code, beta = explain("--host", "beta", env={**_clean_env(), **ssh_env()})
    assert code == 1 and beta["confirmed"] is False
    steps = texts(beta)
    assert "FLASHINFER_CUDA_ARCH_LIST='12.0a' is set" in steps
    assert "12.9 >= 12.9" in steps
    assert any(s["status"] == "unconfirmed" for s in beta["steps"])
    assert any("environment differs" in note for note in beta["notes"])
    assert "service" in beta["root_cause"] and "FLASHINFER_CUDA_ARCH_LIST" in beta["root_cause"]


def test_env_from_is_read_on_the_target(tmp_path: Path) -> None:
    # gamma's session has no CUDA_HOME; the service's env file names alpha's 12.8 toolkit.
    hosts = require("ssh")["hosts"]
    env_file = tmp_path / "sglang.env"
    env_file.write_text(f"CUDA_HOME={hosts['alpha']['env']['CUDA_HOME']}\n")
    args = ("--host", "gamma", "--env-from", str(env_file))
    code, gamma = explain(*args, env={**_clean_env(), **ssh_env()})
    assert code == 1 and gamma["confirmed"] is True
    assert "12.8 < 12.9" in texts(gamma)
    assert any(str(env_file) in s["source"] for s in gamma["steps"])


def test_unreachable_host_is_a_clear_error() -> None:
    require("ssh")
    result = run_cli(
        "explain", "--host", "root@127.0.0.1:1", "--connect-timeout", "3", str(LOG), env=ssh_env()
    )
    assert result.returncode == 2
    assert "unreachable" in result.stderr and "Traceback" not in result.stderr


def test_via_a_local_command_prefix_uses_the_environment_it_sets(tmp_path: Path) -> None:
    from tests.integration.test_explain_incident import _toolkit

    home = _toolkit(tmp_path, "12.8")
    code, via = explain("--via", f"env -i CUDA_HOME={home}", env=_clean_env())
    assert code == 1 and via["confirmed"] is True
    assert "12.8 < 12.9" in texts(via) and str(home) in via["root_cause"]
