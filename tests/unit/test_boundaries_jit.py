"""Boundaries of the JIT models and the fix engine's FlashInfer answers.

Expectations from the packages' released source, not from archgap's output:
- triton 3.6 third_party/nvidia/backend/compiler.py get_ptxas(arch): the bundled
  ``ptxas-blackwell`` (12.9.86 in 3.6.0, triton#10331) assembles for arch >= 100, the plain
  ``ptxas`` (12.8.93) below; sm_103a needs a ptxas of CUDA >= 12.9 (kb/toolkits.json).
- flashinfer jit/core.py check_cuda_arch(): a GPU of compute capability >= 7.5 is accepted
  ("FlashInfer requires GPUs with sm75 or higher"), so 7.5 itself is.
- flashinfer 0.6.8 compilation_context.py _normalize_cuda_arch: SM 12.0 becomes 12.0f with
  nvcc >= 12.9, else raises 'SM 12.x requires CUDA >= 12.9'; SM 9.x is built as 9.0a.
"""

from __future__ import annotations

import pytest

from archgap.analysis.fixes.engine import flashinfer_supports, normalised_target
from archgap.analysis.jit.compilers import jit_findings
from archgap.analysis.verdicts.compat import ComputeCapability, resolve_gpu
from archgap.kb import toolchain as kb
from archgap.probe.facts import InstalledPackage, ToolchainFacts, Toolkit


def bundled(tool: str, version: str) -> Toolkit:
    home = "/site/triton/backends/nvidia/bin"
    return Toolkit(home, "triton", "bundled with triton", tool, f"{home}/{tool}", "ok", version,
                   None, f"`{tool} --version`")  # fmt: skip


TRITON_36 = ToolchainFacts(
    "shell",
    (),
    None,
    (bundled("ptxas", "12.8"), bundled("ptxas-blackwell", "12.9")),
    (InstalledPackage("triton", "3.6.0", "/site/triton-3.6.0.dist-info"),),
    None,
    (),
    (),
)


@pytest.mark.parametrize("gpu", ["10.3", "10.0"])
def test_triton_on_a_10_x_gpu_assembles_with_its_blackwell_ptxas(gpu: str) -> None:
    (finding,) = [x for x in jit_findings(TRITON_36, [resolve_gpu(gpu)]) if x.package == "triton"]
    assert finding.status == "ok", finding.cause
    assert "12.9" in finding.cause


def test_triton_below_10_uses_its_plain_ptxas() -> None:
    (finding,) = [x for x in jit_findings(TRITON_36, [resolve_gpu("9.0")]) if x.package == "triton"]
    assert finding.status == "ok" and "ptxas 12.8 assembles sm_90a" in finding.cause


@pytest.mark.parametrize(("major", "minor", "ok"), [(7, 5, True), (7, 2, False), (8, 0, True)])
def test_flashinfer_accepts_its_own_minimum(major: int, minor: int, ok: bool) -> None:
    assert flashinfer_supports(ComputeCapability(major, minor)) is ok


def test_flashinfer_builds_sm_12_0_with_exactly_the_cuda_it_needs() -> None:
    rng = kb.flashinfer_range("0.6.8")
    assert normalised_target(rng, ComputeCapability(12, 0), "12.9") == "compute_120f"
    assert normalised_target(rng, ComputeCapability(12, 0), "12.8") is None
    assert normalised_target(rng, ComputeCapability(9, 0), "12.8") == "compute_90a"
