"""archgap over real ssh to real sshd instances on loopback, each with its own environment.

The hosts come from scripts/services (see test_remote_services.py): alpha has CUDA_HOME set to a
12.8 toolkit, beta to a 12.9 one and FLASHINFER_CUDA_ARCH_LIST=12.0a, gamma none; each session's
TMPDIR and HOME are dedicated empty directories, so "nothing left behind" can be checked exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.hangs import GUARD, Sleeper
from tests.helpers import DATA, json_output, run_cli
from tests.integration.test_remote_services import (
    SilentListener,
    closed_port,
    host_spec,
    leftovers,
    require,
    snapshot,
    ssh_env,
)

VENV_068 = DATA / "venv-flashinfer-python-0.6.8" / "bin" / "python"
VENV_0616 = DATA / "venv-flashinfer-python-0.6.16" / "bin" / "python"
PY38 = Path("/root/.pyenv/versions/3.8.18/bin/python3")
PY37 = Path("/root/.pyenv/versions/3.7.16/bin/python3")


def probe(*args: str, timeout: float = 90) -> tuple[int, dict[str, Any]]:
    result = run_cli("probe", *args, env=ssh_env(), timeout=timeout)
    return result.returncode, json_output(result, "probe")


def remote_dirs() -> list[str]:
    hosts = require("ssh")["hosts"]
    # Each session's TMPDIR and HOME are dedicated empty directories: any new entry is a leftover.
    # (/tmp itself is shared with concurrent test runs, so it cannot be checked exactly.)
    return [h["tmpdir"] for h in hosts.values()] + [h["home"] for h in hosts.values()]


def test_each_host_reports_its_own_environment_and_venv() -> None:
    if not VENV_068.exists() or not VENV_0616.exists():
        pytest.skip("scripts/testdata has not installed the flashinfer venvs")
    before = snapshot(*remote_dirs())
    code, alpha = probe("--host", "alpha", "--python", str(VENV_068))
    assert code == 0, alpha
    code, beta = probe("--host", host_spec("beta"), "--python", str(VENV_0616))
    assert code == 0, beta
    hosts = require("ssh")["hosts"]
    assert alpha["transport"] == "ssh" and alpha["target"] == "alpha"
    assert alpha["facts"]["env"]["CUDA_HOME"] == hosts["alpha"]["env"]["CUDA_HOME"]
    assert beta["facts"]["env"]["CUDA_HOME"] == hosts["beta"]["env"]["CUDA_HOME"]
    assert beta["facts"]["env"]["FLASHINFER_CUDA_ARCH_LIST"] == "12.0a"
    dists = {d["name"]: d["version"] for d in alpha["facts"]["sections"]["python"]["distributions"]}
    assert dists == {"flashinfer-python": "0.6.8"}
    beta_dists = beta["facts"]["sections"]["python"]["distributions"]
    assert [(d["name"], d["version"]) for d in beta_dists] == [("flashinfer-python", "0.6.16")]
    # Only allowlisted variables travel back: never the ssh session's own (SSH_CONNECTION ...).
    assert not any(k.startswith("SSH_") for k in alpha["facts"]["env"])
    assert leftovers(before) == {}
    # The toolkit the session's CUDA_HOME names is found there, with its nvcc's version.
    section = beta["facts"]["sections"].get("toolchains")
    if section is None:
        pytest.xfail(f"toolchains section failed: {beta['facts']['errors'].get('toolchains')}")
    toolkits = section["toolkits"]
    assert any(t["found_by"] == "CUDA_HOME" and t["version"] == "12.9" for t in toolkits), toolkits


@pytest.mark.skipif(not PY38.exists(), reason="no Python 3.8 interpreter at " + str(PY38))
def test_probe_runs_under_python_3_8_remotely() -> None:
    code, doc = probe("--host", "gamma", "--python", str(PY38), "--sections", "gpu,python")
    assert code == 0, doc
    assert doc["facts"]["probe_python"].startswith("3.8.")
    assert doc["facts"]["errors"] == {}


@pytest.mark.skipif(not PY37.exists(), reason="no Python 3.7 interpreter at " + str(PY37))
def test_interpreter_too_old_is_named() -> None:
    code, doc = probe("--host", "gamma", "--python", str(PY37))
    assert code == 2
    assert doc["error"]["kind"] == "interpreter-too-old"
    assert "3.7.16" in doc["error"]["message"]


def test_missing_interpreter_fails_clearly() -> None:
    code, doc = probe("--host", "alpha", "--python", "/opt/no-such-venv/bin/python")
    assert code == 2
    assert doc["error"]["kind"] == "no-interpreter"
    assert "/opt/no-such-venv/bin/python" in doc["error"]["message"]


def test_closed_port_is_unreachable_at_once() -> None:
    code, doc = probe("--host", f"root@127.0.0.1:{closed_port()}", "--connect-timeout", "2")
    assert code == 2
    assert doc["error"]["kind"] == "unreachable"
    # "at once": the refusal is the answer, not the connect timeout after waiting for one
    message = doc["error"]["message"].lower()
    assert "refused" in message and "timed out" not in message


def test_silent_listener_fails_within_the_connect_timeout() -> None:
    listener = SilentListener()
    try:
        code, doc = probe(
            "--host", f"root@127.0.0.1:{listener.port}", "--connect-timeout", "2", "--timeout", "60"
        )
    finally:
        listener.close()
    assert code == 2
    # The connect timeout ended it ("unreachable"), not the 60 s total (that is kind "timeout").
    assert doc["error"]["kind"] == "unreachable", doc
    assert "timed out" in doc["error"]["message"].lower()


def probe_alpha_with_config(tmp_path: Path, option: str, value: Path) -> tuple[int, dict[str, Any]]:
    """Probe alpha with the test ssh config, its ``option`` (IdentityFile...) set to ``value``."""
    config = Path(ssh_env()["ARCHGAP_SSH_CONFIG"]).read_text()
    assert f"{option} " in config
    own = tmp_path / "ssh_config"
    own.write_text(config.replace(f"{option} ", f"{option} {value} #"))
    result = run_cli("probe", "--host", "alpha", env={"ARCHGAP_SSH_CONFIG": str(own)}, timeout=60)
    return result.returncode, json_output(result, "probe")


def test_unknown_host_key_is_refused(tmp_path: Path) -> None:
    empty_known = tmp_path / "known_hosts"
    empty_known.write_text("")
    code, doc = probe_alpha_with_config(tmp_path, "UserKnownHostsFile", empty_known)
    assert code == 2
    assert doc["error"]["kind"] == "host-key"


def test_wrong_key_is_an_auth_refusal(tmp_path: Path) -> None:
    import subprocess

    key = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    code, doc = probe_alpha_with_config(tmp_path, "IdentityFile", key)
    assert code == 2
    assert doc["error"]["kind"] == "auth"


def test_total_timeout_kills_a_slow_target(tmp_path: Path) -> None:
    # A "python" that never answers: a sleeper ignores the probe, records its pids and, should
    # it ever wake (in 300 s), leaves a marker.
    sleeper = Sleeper(tmp_path)
    via = f"sh -c '{sleeper.shell()}' sh"
    result = run_cli("probe", "--via", via, "--timeout", "2", env=ssh_env(), timeout=GUARD)
    doc = json_output(result, "probe")
    assert result.returncode == 2
    assert doc["error"]["kind"] == "timeout"
    sleeper.assert_cut_short()


def test_require_is_a_health_check_exit_code() -> None:
    # No GPU on these loopback hosts: a required sm_120 is missing -> exit 1, and says which.
    code, doc = probe("--host", "alpha", "--sections", "gpu", "--require", "sm_120")
    assert code == 1
    assert doc["missing"] == ["sm_120 (compute capability 12.0)"]
    code, doc = probe("--host", "alpha", "--sections", "gpu")
    assert code == 0
