"""archgap under the real slurmd of scripts/services: deploy/slurm/archgap-node-check as the
Prolog and the HealthCheckProgram, and the controller RPCs a ``--drain`` check makes.

The rules (slurm.conf(5)): a Prolog that exits non-zero drains the node and requeues the job; a
HealthCheckProgram's exit code is ignored (it must drain the node itself). slurmd runs both as
root with only SLURM_* variables (no PATH). Verdicts follow from tests/fixtures/cuda/build.sh:
libptxonly.so has only compute_80 PTX, so on a T4 (7.5) its package has no kernel; libmix.so has
SASS for sm_75.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.hangs import GUARD
from tests.helpers import (
    good_and_old_venvs,
    run_cli,
)
from tests.integration.test_remote_services import require

ROOT = Path(__file__).resolve().parents[2]
NODE_CHECK = ROOT / "deploy" / "slurm" / "archgap-node-check"


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return good_and_old_venvs(tmp_path_factory.mktemp("slurmvenvs"))


def responding(env: dict[str, str], node: str) -> None:
    """Wait until slurmctld hears from a node just resumed (NOT_RESPONDING for a moment);
    GUARD is a hang guard, not a timing claim."""
    deadline = time.monotonic() + GUARD
    while "NOT_RESPONDING" in state(env, node)[0]:
        assert time.monotonic() < deadline, f"{node} still NOT_RESPONDING after {GUARD:g} s"
        time.sleep(0.5)


@pytest.fixture
def slurm(tmp_path: Path):  # type: ignore[no-untyped-def]
    """The test Slurm: (env, node, hooks); the node idle before and after, no hook left."""
    info = require("slurm")
    env = {**os.environ, "SLURM_CONF": str(info["conf"])}
    node, hooks = str(info["node"]), Path(str(info["hooks"]))
    assert "DRAIN" not in state(env, node)[0]
    responding(env, node)
    try:
        yield env, node, hooks
    finally:
        for hook in hooks.iterdir():
            hook.unlink()
        subprocess.run(["scancel", "--full", "--user=root"], env=env, timeout=20, check=False)
        if "DRAIN" in state(env, node)[0]:
            scontrol(env, "update", f"NodeName={node}", "State=RESUME")


def state(env: dict[str, str], node: str) -> tuple[str, str]:
    """(State flags, Reason) as the controller has them."""
    text = subprocess.run(["scontrol", "show", "node", node], capture_output=True, text=True,
                          env=env, timeout=20, check=True).stdout  # fmt: skip
    fields = dict(part.split("=", 1) for part in text.split() if "=" in part)
    reason = text.partition("Reason=")[2].strip().rsplit(" [", 1)[0] if "Reason=" in text else ""
    return fields["State"], reason


def scontrol(env: dict[str, str], *args: str) -> None:
    subprocess.run(["scontrol", *args], env=env, timeout=20, check=True)


def hook(hooks: Path, name: str, script: str) -> None:
    """Install hooks/NAME atomically (slurmd may run it at any moment)."""
    tmp = hooks / f".{name}.tmp"
    tmp.write_text(script)
    tmp.chmod(0o755)
    tmp.replace(hooks / name)


def node_check(tmp_path: Path, args: str, slurm_conf: str) -> str:
    """The hook that runs deploy/slurm/archgap-node-check with a node-check.conf of ``args``
    (and SLURM_CONF: the test Slurm's configuration is not in the default place, and the health
    check does not get SLURM_CONF from slurmd)."""
    shim = tmp_path / "archgap"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m archgap "$@"\n')
    shim.chmod(0o755)
    conf = tmp_path / "node-check.conf"
    conf.write_text(f'ARCHGAP={shim}\nARCHGAP_ARGS="{args}"\n'
                    f"ARCHGAP_STATE_DIR={tmp_path / 'state'}\nSLURM_CONF={slurm_conf}\n"
                    "export ARCHGAP_STATE_DIR SLURM_CONF\n")  # fmt: skip
    return f"#!/bin/sh\nARCHGAP_NODE_CHECK_CONF={conf} exec {NODE_CHECK}\n"


def job(env: dict[str, str], node: str) -> subprocess.CompletedProcess[str]:
    argv = ["srun", "-N1", "-w", node, "--immediate=30", "true"]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)


def wait_for(env: dict[str, str], node: str, drained: bool, seconds: float = 60) -> tuple[str, str]:
    """The node's state once it is (or is no longer) drained, or after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        now = state(env, node)
        if ("DRAIN" in now[0]) == drained or time.monotonic() > deadline:
            return now
        time.sleep(0.5)


def test_any_nonzero_prolog_exit_drains_the_node(slurm: tuple[dict[str, str], str, Path]) -> None:
    """Exit 2 (archgap could not judge) drains too when it reaches slurmd: the rule the
    node-check wrapper maps archgap's codes onto."""
    env, node, hooks = slurm
    hook(hooks, "prolog", "#!/bin/sh\nexit 2\n")
    done = job(env, node)
    assert done.returncode != 0 and "prolog" in done.stderr.lower(), done.stderr
    flags, reason = state(env, node)
    assert "DRAIN" in flags and reason == "Prolog error", (flags, reason)


def test_node_check_as_the_prolog(slurm: tuple[dict[str, str], str, Path], tmp_path: Path,
                                  venvs: dict[str, Path]) -> None:  # fmt: skip
    env, node, hooks = slurm
    # Could not judge (no such interpreter): fail closed, the job is refused and the node drained
    # with a reason of its own (more in test_node_check_fail_closed).
    hook(
        hooks,
        "prolog",
        node_check(tmp_path, "--python /nonexistent/python --gpu T4", env["SLURM_CONF"]),
    )
    done = job(env, node)
    assert done.returncode != 0, done.stderr
    flags, reason = state(env, node)
    assert "DRAIN" in flags and reason.startswith("archgap: unjudged: no-python: "), reason
    scontrol(env, "update", f"NodeName={node}", "State=RESUME")
    responding(env, node)
    # A gap: the job is refused and the node drained with archgap's line as the reason.
    hook(
        hooks,
        "prolog",
        node_check(tmp_path, f"--python {venvs['old']} --gpu T4", env["SLURM_CONF"]),
    )
    done = job(env, node)
    assert done.returncode != 0, done.stderr
    flags, reason = state(env, node)
    assert "DRAIN" in flags, flags
    assert reason.startswith("archgap: no-kernel: ptxkernels 0.1 on 7.5 (T4): "), reason


def test_node_check_as_the_health_check_program(
    slurm: tuple[dict[str, str], str, Path], tmp_path: Path, venvs: dict[str, Path]
) -> None:
    """slurmd runs it every HealthCheckInterval (2 s in the test Slurm): a gap drains the node
    with archgap's reason; once the environment is fixed the next run resumes it."""
    env, node, hooks = slurm
    hook(
        hooks,
        "healthcheck",
        node_check(tmp_path, f"--python {venvs['old']} --gpu T4", env["SLURM_CONF"]),
    )
    flags, reason = wait_for(env, node, drained=True)
    assert "DRAIN" in flags, (flags, reason)
    assert reason.startswith("archgap: no-kernel: ptxkernels 0.1 on 7.5 (T4): "), reason
    hook(
        hooks,
        "healthcheck",
        node_check(tmp_path, f"--python {venvs['good']} --gpu T4", env["SLURM_CONF"]),
    )
    flags, reason = wait_for(env, node, drained=False)
    assert "DRAIN" not in flags, (flags, reason)


def test_healthy_drain_checks_ask_the_controller_nothing(
    slurm: tuple[dict[str, str], str, Path], tmp_path: Path, venvs: dict[str, Path]
) -> None:
    """Every scontrol call is logged by a wrapper first on PATH: a healthy check asks once after a
    start (no record yet) and never again; a gap asks, drains once, and then only asks."""
    env, node, _ = slurm
    real = subprocess.run(["sh", "-c", "command -v scontrol"], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(f'#!/bin/sh\necho "$1" >> {calls}\nexec {real} "$@"\n')
    (bin_dir / "scontrol").chmod(0o755)
    run_env = {"SLURM_CONF": env["SLURM_CONF"], "SLURMD_NODENAME": node,
               "ARCHGAP_STATE_DIR": str(tmp_path / "state"),
               "PATH": f"{bin_dir}:{os.environ['PATH']}"}  # fmt: skip

    def check(venv: str) -> tuple[int, list[str]]:
        calls.unlink(missing_ok=True)
        done = run_cli("scan", "--health", "--drain", "--python", str(venvs[venv]), "--gpu", "T4",
                       env=run_env)  # fmt: skip
        assert "could not" not in done.stderr, done.stderr
        return done.returncode, calls.read_text().split() if calls.exists() else []

    assert check("good") == (0, ["show"])
    assert check("good") == (0, [])
    assert check("old") == (1, ["show", "update"])
    assert "DRAIN" in state(env, node)[0]
    assert check("old") == (1, ["show"])  # already drained with this reason
    assert check("good") == (0, ["show", "update"])  # resumed
    assert "DRAIN" not in state(env, node)[0]
    assert check("good") == (0, [])
