"""explain gives no fix for a GPU that neither the log nor the caller names (issue 39 item 5; the
log-only path since issue 43), on the path where archgap examines an environment it chose.

An environment archgap falls back to (the active VIRTUAL_ENV, which the log does not name) may be
on another machine than the one that crashed: this machine's GPU is not taken as the log's. An
environment the caller names (--python) is theirs: its GPU is the GPU in question.

This machine has no GPU: nvidia-smi is a stand-in on PATH that prints what nvidia-smi prints for
an RTX 4090 (``--query-gpu=index,name,uuid,compute_cap,driver_version --format=csv,noheader,
nounits``; compute capability 8.9 per NVIDIA's CUDA GPUs list). The environment is the real
flashinfer-python 0.6.8 venv of the test data.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers import json_output
from tests.toolkit_stubs import incident_copy

NO_KERNEL = "RuntimeError: CUDA error: no kernel image is available for execution on the device"
ROW = "0, NVIDIA GeForce RTX 4090, GPU-6c1a2f4e-8d7b-4f0e-9a51-2b3c4d5e6f70, 8.9, 570.86.10"
BANNER = "| NVIDIA-SMI 570.86.10    Driver Version: 570.86.10    CUDA Version: 12.8 |"
SMI = f"""#!/bin/sh
case "$1" in
  --query-gpu=*) echo "{ROW}" ;;
  *) echo "{BANNER}" ;;
esac
"""


def _explain(tmp_path: Path, *args: str, **env: str) -> dict[str, Any]:
    smi = tmp_path / "smi" / "nvidia-smi"
    smi.parent.mkdir(exist_ok=True)
    smi.write_text(SMI)
    smi.chmod(0o755)
    base = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    base["PATH"] = f"{smi.parent}:{base.get('PATH', '/usr/bin:/bin')}"
    done = subprocess.run(
        [sys.executable, "-m", "archgap", "explain", *args, "--json"],
        capture_output=True,
        text=True,
        env={**base, **env},
        timeout=120,
        check=False,
    )
    found: dict[str, Any] = json_output(done, "explain")["explain"]
    return found


def _fixes(d: dict[str, Any]) -> str:
    return " | ".join(f["text"] for f in d["fixes"])


def test_the_gpu_of_an_environment_archgap_chose_is_not_the_log_s(tmp_path: Path) -> None:
    venv = incident_copy(tmp_path) / "venv"
    d = _explain(tmp_path, "--message", NO_KERNEL, VIRTUAL_ENV=str(venv))
    assert d["environment_reason"] == f"the active environment, VIRTUAL_ENV={venv}"
    assert d["status"] == "diagnosed"
    assert "sm_89" not in _fixes(d) and "8.9" not in _fixes(d)  # no fix for the GPU here
    assert "<CC>" in _fixes(d)  # the fixes wait for the GPU, and say how to find it
    assert any("RTX 4090" in n and "(8.9)" in n and "not taken" in n for n in d["notes"])


def test_the_gpu_of_the_environment_the_caller_names_is_in_question(tmp_path: Path) -> None:
    venv = incident_copy(tmp_path) / "venv"
    python = next(p for p in (venv / "bin").iterdir() if p.name.startswith("python"))
    d = _explain(tmp_path, "--message", NO_KERNEL, "--python", str(python))
    assert d["environment_reason"] == ""
    # an RTX 4090 is 8.9: a build with sm_89 SASS (or sm_80/sm_86: plain SASS of an older
    # minor of its major runs on it, CUDA C++ Programming Guide, binary compatibility)
    assert "sm_89" in _fixes(d) and "<CC>" not in _fixes(d)
