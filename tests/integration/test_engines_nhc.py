"""NHC's mark-offline path and the GPU-fault health code.

LBNL NHC 1.4.3 (mej/nhc, file ``nhc``, lines 61 and 64 of ``die()``) marks a node offline with

    eval $OFFLINE_NODE "'$HOSTNAME'" "'$*'"

so the check's message is shell text inside single quotes: a quote in it ends the quoting and the
rest is parsed as shell syntax (the node then stays up). The tests run that line as NHC does, with
bash and deploy/nhc/archgap.nhc sourced, and an OFFLINE_NODE that records the arguments it gets:
the node is marked offline only if the recorder receives exactly (hostname, reason).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import CUDA_BIN, install_fake_distribution, make_venv, run_cli
from tests.toolkit_stubs import banner_toolkit, venv_python

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "deploy" / "nhc" / "archgap.nhc"
# The recorder NHC's OFFLINE_NODE points to here: its arguments, one JSON document.
RECORDER = (
    "#!/bin/sh\nexec {python} -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "
    '"$@" >> {out}\n'
)
# NHC 1.4.3's die(), reduced to what decides the mark-offline call (nhc lines 48-64).
HARNESS = r"""
function die() { local RET="$1"; shift; eval $OFFLINE_NODE "'$HOSTNAME'" "'$*'"; exit $RET; }
function log() { echo "log: $*"; }
HOSTNAME=node07
. "$CHECK"
check_archgap "$@"
"""


def nhc(tmp_path: Path, *check_args: str, env: dict[str, str] | None = None, check: Path = CHECK,
        ) -> tuple[int, list[list[str]], str]:  # fmt: skip
    """Exit status of the NHC run, every call NHC made to OFFLINE_NODE, and bash's stderr."""
    out = tmp_path / "offline.jsonl"
    out.unlink(missing_ok=True)
    recorder = tmp_path / "node-mark-offline"
    recorder.write_text(RECORDER.format(python=sys.executable, out=out))
    recorder.chmod(0o755)
    archgap = tmp_path / "archgap"
    archgap.write_text(f'#!/bin/sh\nexec {sys.executable} -m archgap "$@"\n')
    archgap.chmod(0o755)
    done = subprocess.run(
        ["bash", "-c", HARNESS, "nhc", *check_args], capture_output=True, text=True, timeout=120,
        env={**os.environ, **(env or {}), "CHECK": str(check), "OFFLINE_NODE": str(recorder),
             "ARCHGAP": str(archgap)}, check=False,
    )  # fmt: skip
    calls = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return done.returncode, calls, done.stderr


def test_the_harness_is_nhc_s_eval(tmp_path: Path) -> None:
    """The rule the health line obeys: a message with quotes never reaches OFFLINE_NODE whole."""
    check = tmp_path / "quoted.nhc"
    check.write_text('function check_archgap() { die 1 "FlashInfer 0.6.8\'s rule"; }\n')
    _, calls, stderr = nhc(tmp_path, check=check)
    assert calls == [] and "unexpected EOF" in stderr, (calls, stderr)  # the node stays up
    check.write_text("function check_archgap() { die 1 \"logged: 'Failed to get device'\"; }\n")
    _, calls, _ = nhc(tmp_path, check=check)
    assert calls == [["node07", "logged: Failed", "to", "get", "device"]]  # a cut reason
    check.write_text('function check_archgap() { die 1 "logged: Failed to get device"; }\n')
    assert nhc(tmp_path, check=check)[:2] == (1, [["node07", "logged: Failed to get device"]])


def test_the_incident_jit_line_marks_the_node_offline(tmp_path: Path) -> None:
    """flashinfer-python 0.6.8 + nvcc 12.8 on sm_120: the reason quotes FlashInfer's log message;
    it must still reach OFFLINE_NODE whole, as the node's reason."""
    python = venv_python("venv-flashinfer-python-0.6.8")
    if not python.exists():
        pytest.skip("scripts/testdata has not installed the flashinfer wheels")
    home = banner_toolkit(tmp_path, "12.8")
    args = ("--python", str(python), "--gpu", "12.0")
    env = {"CUDA_HOME": str(home)}
    line = run_cli("scan", "--health", *args, env=env).stdout.strip()
    assert line.startswith("archgap: jit-fails: flashinfer-python 0.6.8 on 12.0: "), line
    assert len(line) <= 200
    code, calls, stderr = nhc(tmp_path, *args, env=env)
    assert code == 1, stderr
    assert calls == [["node07", line.removeprefix("archgap: ")]]


def test_a_run_that_cannot_judge_fails_the_check(tmp_path: Path) -> None:
    """Fail closed, as NHC's own checks do (more in test_node_check_fail_closed)."""
    code, calls, stderr = nhc(tmp_path, "--python", "/nonexistent/python", "--gpu", "T4")
    assert code == 1, stderr
    assert len(calls) == 1 and calls[0][0] == "node07", calls
    assert calls[0][1].startswith("archgap could not judge: no-python: /nonexistent/"), calls


def test_reasons_never_carry_shell_syntax() -> None:
    from archgap.report.health import reason_line

    line = reason_line("jit-fails", "pkg 1 on 12.0", 'it\'s "$HOME" `id` a\\b')
    assert not set(line) & set("'\"`$\\"), line


def _failing_nvidia_smi(tmp_path: Path, script: str) -> dict[str, str]:
    bin_dir = tmp_path / "smi-bin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(script)
    smi.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_a_failing_nvidia_smi_is_a_gpu_fault_that_drains(tmp_path: Path) -> None:
    """nvidia-smi installed but failing (here the driver's own message when it cannot reach the
    GPU) is a node that cannot run GPU jobs: exit 1 with its own code, not 'no GPU' (exit 2)."""
    install_fake_distribution(make_venv(tmp_path / "venv"), "fakekernels", "1.2.3",
                              {"fakekernels/libmix.so": CUDA_BIN / "libmix.so"})  # fmt: skip
    env = _failing_nvidia_smi(tmp_path, "#!/bin/sh\necho \"Unable to determine the device handle "
                              "for GPU0000:41:00.0: Unknown Error\"\nexit 255\n")  # fmt: skip
    python = str(tmp_path / "venv" / "bin" / "python")
    for named in ((), ("--require", "sm_120")):  # the fault, not "sm_120 missing"
        done = run_cli("scan", "--health", "--python", python, *named, env=env)
        assert done.returncode == 1, done.stdout + done.stderr
        assert done.stdout.startswith("archgap: gpu-fault: nvidia-smi: "), done.stdout
        assert "Unknown Error" in done.stdout
    # Without nvidia-smi the node simply has no GPU: nothing to judge.
    done = run_cli("scan", "--health", "--python", python, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 2 and done.stdout.startswith("archgap: no-gpu: "), done.stdout


def test_a_hung_nvidia_smi_is_a_gpu_fault(tmp_path: Path) -> None:
    """A GPU that fell off the bus makes nvidia-smi block: the probe's timeout ends it, and the
    timeout is the fault's reason."""
    from archgap.analysis.gpu_fault import gpu_fault
    from archgap.probe.environment.gpu import probe_gpus
    from archgap.probe.environment.system import System

    env = _failing_nvidia_smi(tmp_path, "#!/bin/sh\nexec sleep 60\n")
    facts = probe_gpus(System.local(environ={**os.environ, **env}), timeout=0.5)
    assert facts.gpus == ()
    why = gpu_fault(facts)
    assert why is not None and "timed out" in why, facts.problems
