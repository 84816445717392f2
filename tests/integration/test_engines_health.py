"""`archgap scan --health` (one line for Slurm/NHC) and `--drain` on the real one-node Slurm that
scripts/services starts; `--prometheus` read back by prometheus_client's own parser.

Verdicts follow from tests/fixtures/cuda/build.sh: libmix.so has SASS sm_75 ... sm_120, so it runs
natively on a T4 (7.5); libptxonly.so has only compute_80 PTX, which the driver cannot JIT for a
GPU below 8.0: on a T4 the package has no kernel at all ("no kernel image is available").
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import (
    good_and_old_venvs,
    run_cli,
)
from tests.integration.test_remote_services import require
from tests.toolkit_stubs import banner_toolkit, venv_python

CODES = ("gpu-missing", "no-kernel", "jit-fails", "probe-failed", "no-python", "gpu-unknown",
         "no-gpu", "usage")  # fmt: skip


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return good_and_old_venvs(tmp_path_factory.mktemp("healthvenvs"))


def health(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = run_cli("scan", "--health", *args, env=env)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout  # exactly one line, whatever happened
    line = lines[0]
    assert len(line) <= 200
    assert line == "OK" or line.split(": ")[1] in CODES, line
    return result.returncode, line


def test_health_ok_and_gap_lines(venvs: dict[str, Path]) -> None:
    assert health("--python", str(venvs["good"]), "--gpu", "T4") == (0, "OK")
    code, line = health("--python", str(venvs["old"]), "--gpu", "T4")
    assert code == 1
    assert line.startswith("archgap: no-kernel: ptxkernels 0.1 on 7.5 (T4): "), line
    assert "libptx.so" in line  # the library with nothing for 7.5


def test_health_gpu_missing_no_gpu_and_usage(venvs: dict[str, Path]) -> None:
    # No GPU on this machine: a --require'd GPU is missing (a gap: the node cannot serve it) ...
    code, line = health("--python", str(venvs["good"]), "--require", "sm_120")
    assert code == 1 and line.startswith("archgap: gpu-missing: sm_120: not present"), line
    # ... and with nothing present or named there is nothing to judge: not OK, not a gap.
    code, line = health("--python", str(venvs["good"]))
    assert code == 2 and line.startswith("archgap: no-gpu: no GPU found and none named"), line
    code, line = health("--gpu", "RTX 9999 Imaginary")
    assert code == 2 and line.startswith("archgap: usage: "), line
    code, line = health("--python", "/nonexistent/python", "--gpu", "T4")
    assert code == 2 and line.split(": ")[1] in ("no-python", "probe-failed"), line
    code, line = health("--gpu", "T4", "--drain", env={"SLURMD_NODENAME": ""})
    assert code == 2 and "SLURMD_NODENAME is not set" in line


def test_health_jit_fails_for_the_incident(tmp_path: Path) -> None:
    """flashinfer-python 0.6.8 + nvcc 12.8 on sm_120: FlashInfer's SM 12.x rule needs CUDA 12.9."""
    python = venv_python("venv-flashinfer-python-0.6.8")
    if not python.exists():
        pytest.skip("scripts/testdata has not installed the flashinfer wheels")
    home = banner_toolkit(tmp_path, "12.8")
    code, line = health("--python", str(python), "--gpu", "12.0", env={"CUDA_HOME": str(home)})
    assert code == 1
    assert line.startswith("archgap: jit-fails: flashinfer-python 0.6.8 on 12.0: "), line
    assert "12.9" in line


def test_health_reason_lines_are_cut_to_200() -> None:
    from archgap.report.health import reason_line

    line = reason_line("no-kernel", "torch 2.14.1 on 7.0 (V100)", "libx.so\n" * 100, more=3)
    assert len(line) == 200 and "\n" not in line and line.endswith("… (+3 more)")


def _node_state(conf: str, node: str) -> tuple[str, str]:
    done = subprocess.run(
        ["sinfo", "--noheader", "--Node", f"--nodes={node}", "--format=%T|%E"],
        capture_output=True, text=True, timeout=20, env={**os.environ, "SLURM_CONF": conf},
        check=True,
    )  # fmt: skip
    state, _, reason = done.stdout.strip().partition("|")
    return state.rstrip("*"), reason  # "*": not responding for a moment after a state change


def _scontrol(conf: str, *args: str) -> None:
    subprocess.run(
        ["scontrol", *args], env={**os.environ, "SLURM_CONF": conf}, timeout=20, check=True
    )


def test_drain_and_resume_on_the_real_slurm(venvs: dict[str, Path], tmp_path: Path) -> None:
    """A job step on the gap node drains it with the health line as the reason (SLURMD_NODENAME
    comes from Slurm itself); a later OK run (as HealthCheckProgram would) resumes only a drain
    that archgap made."""
    info = require("slurm")
    conf, node = info["conf"], info["node"]
    env = {"SLURM_CONF": conf, "ARCHGAP_STATE_DIR": str(tmp_path)}  # the node's drain record
    assert _node_state(conf, node)[0] == "idle"
    try:
        step = subprocess.run(
            ["srun", "-N1", "-n1", "-w", node, sys.executable, "-m", "archgap", "scan",
             "--health", "--drain", "--python", str(venvs["old"]), "--gpu", "T4"],
            capture_output=True, text=True, timeout=120, env={**os.environ, **env}, check=False,
        )  # fmt: skip
        assert step.returncode == 1, step.stdout + step.stderr
        line = step.stdout.strip()
        assert line.startswith("archgap: no-kernel: ptxkernels 0.1 on 7.5 (T4)")
        state, reason = _node_state(conf, node)
        assert state.startswith("drain") and reason == line, (state, reason)
        # OK on the same node: archgap lifts its own drain.
        code, ok = health("--drain", "--python", str(venvs["good"]), "--gpu", "T4",
                          env={**env, "SLURMD_NODENAME": node})  # fmt: skip
        assert (code, ok) == (0, "OK")
        assert _node_state(conf, node) == ("idle", "none")
        # A drain someone else made stays.
        _scontrol(conf, "update", f"NodeName={node}", "State=DRAIN", "Reason=maintenance")
        code, ok = health("--drain", "--python", str(venvs["good"]), "--gpu", "T4",
                          env={**env, "SLURMD_NODENAME": node})  # fmt: skip
        assert (code, ok) == (0, "OK")
        assert _node_state(conf, node) == ("drained", "maintenance")
    finally:
        if _node_state(conf, node)[0].startswith("drain"):
            _scontrol(conf, "update", f"NodeName={node}", "State=RESUME")


def _families(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The file as prometheus_client's own parser reads it (it raises on malformed input)."""
    return {
        f.name: [(s.labels, s.value) for s in f.samples]
        for f in text_string_to_metric_families(text)
    }


def test_scan_prometheus_textfile(venvs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "textfile"
    out.mkdir()
    prom = out / "archgap.prom"
    prom.write_text("stale\n")  # replaced whole, never appended to
    result = run_cli("scan", "--python", str(venvs["old"]), "--gpu", "T4",
                     "--prometheus", str(prom))  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert [p.name for p in out.iterdir()] == ["archgap.prom"]  # no temporary file left
    families = _families(prom.read_text())
    verdicts = families["archgap_package_verdict"]
    env = {"environment": str(venvs["old"])}  # every series: the interpreter judged
    assert verdicts == [
        ({"package": "ptxkernels", "version": "0.1", "gpu": "7.5", "verdict": "none", **env}, 1.0)
    ]
    assert families["archgap_gaps"] == [(env, 1.0)]
    assert families["archgap_scan_success"] == [(env, 1.0)]
    ((_, when),) = families["archgap_scan_timestamp_seconds"]
    assert abs(when - prom.stat().st_mtime) < 60
    # A scan that could not collect facts still writes the file: success 0, no verdicts.
    failed = run_cli("scan", "--python", "/nonexistent/python", "--gpu", "T4",
                     "--prometheus", str(prom))  # fmt: skip
    assert failed.returncode == 2
    families = _families(prom.read_text())
    # Nothing judged: the interpreter asked for names the environment.
    assert families["archgap_scan_success"] == [({"environment": "/nonexistent/python"}, 0.0)]
    assert families["archgap_package_verdict"] == []
