"""archgap scan on a real CUDA 13 torch environment (opt-in: scripts/test -m realenv).

The venv is bench/.data/venv-torch with ``pip install torch==2.14.1`` (a CUDA 13 build with its
nvidia-* wheels), made by bench/setup_torch_venv. Expectations come from PyTorch's published
build matrix, not from archgap: the cu130 wheels are built for TORCH_CUDA_ARCH_LIST
7.5;8.0;8.6;9.0;10.0;12.0 (pytorch RELEASE.md support matrix, PR #197555), so sm_120 SASS serves
an RTX PRO 6000, sm_75 a T4, and nothing serves a V100 (7.0: Volta was dropped in 2.11).
"""

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT, json_output, run_cli

VENV = ROOT / "bench" / ".data" / "venv-torch" / "bin" / "python"

pytestmark = [
    pytest.mark.realenv,
    pytest.mark.skipif(not VENV.exists(), reason=f"{VENV} missing: run bench/setup_torch_venv"),
]


def scan(*gpus: str) -> tuple[int, dict[str, Any]]:
    args = [a for gpu in gpus for a in ("--gpu", gpu)]
    result = run_cli("scan", "--python", str(VENV), *args, "--json", timeout=600)
    return result.returncode, json_output(result, "scan")


def torch_verdict(doc: dict[str, Any], gpu: str) -> dict[str, Any]:
    return next(p for p in doc["packages"] if p["package"] == "torch" and p["gpu"] == gpu)


def library(verdict: dict[str, Any], name: str) -> dict[str, Any]:
    return next(lib for lib in verdict["libraries"] if Path(lib["path"]).name == name)


@pytest.mark.parametrize("gpu", ["RTX PRO 6000", "sm_120"])
def test_blackwell_workstation_runs_natively(gpu: str) -> None:
    code, doc = scan(gpu)
    torch = torch_verdict(doc, gpu)
    assert torch["verdict"] == "native"
    assert library(torch, "libtorch_cuda.so")["deciding_entry"] == "sm_120 SASS in .nv_fatbin"
    assert code == 0


def test_t4_runs_on_sm75_cubins() -> None:
    _, doc = scan("T4")
    torch = torch_verdict(doc, "T4")
    assert torch["verdict"] in ("native", "partial")
    assert library(torch, "libtorch_cuda.so")["deciding_entry"] == "sm_75 SASS in .nv_fatbin"


def test_v100_is_a_gap() -> None:
    code, doc = scan("V100")
    torch = torch_verdict(doc, "V100")
    assert torch["verdict"] == "none"
    assert "no kernel image is available" in library(torch, "libtorch_cuda.so")["reason"]
    assert code == 1
