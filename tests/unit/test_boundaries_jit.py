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
from archgap.analysis.fixes.flashinfer_rules import build_target
from archgap.analysis.jit.compilers import jit_findings
from archgap.analysis.jit.runtime_compilers import runtime_compiler_findings
from archgap.analysis.jit.torch_ext import parse_arch_list, serves
from archgap.analysis.verdicts.compat import ComputeCapability, resolve_gpu
from archgap.kb import toolchain as kb
from archgap.probe.facts import (
    BinaryFacts,
    Distribution,
    InstalledPackage,
    PythonEnvironment,
    RuntimeCompiler,
    ToolchainFacts,
    Toolkit,
    TorchBuild,
)


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


# -- run-time compilers (analysis/jit/runtime_compilers.py). CUDA C++ Programming Guide,
# "Application Compatibility": PTX is JIT-compiled by the driver when the driver knows its PTX
# ISA; NVRTC emits its release's ISA (NVRTC 13.0: PTX ISA 9.0), and driver 580.65.06 is CUDA
# 13.0's GA minimum, so it JIT-compiles ISA 9.0 itself; 575.51.03 (CUDA 12.9) knows ISA 8.8.


def rtc_row(driver: str) -> tuple[str, str]:
    lib = "/site/warp/lib.so"
    dist = Distribution("warp-lang", "1.0", "/d", (lib,))
    env = PythonEnvironment("/py", "3.11", ("/site",), (dist,), ())
    nvrtc_130 = RuntimeCompiler("nvrtc", (75, 80, 86, 90, 100, 120), None, "13.0")
    binaries = (BinaryFacts(lib, 1, "elf", (), False, compilers=(nvrtc_130,)),)
    (row,) = runtime_compiler_findings(env, binaries, [resolve_gpu("8.9")], driver, "--driver")
    return row.status, row.cause


def test_a_driver_that_knows_exactly_the_compilers_ptx_isa_jits_it() -> None:
    status, cause = rtc_row("580.65.06")  # 8.9 is not NVRTC's target: PTX for compute_86
    assert status == "ok" and "compute_86" in cause
    # 575.51.03 runs CUDA 12 at most: NVRTC 13.0's code (a CUDA 13 runtime's) does not run there
    # at all (minor-version compatibility's floor: CUDA 13.x needs >= 580), before any PTX ISA
    status, cause = rtc_row("575.51.03")
    assert status == "fails" and "makes CUDA 13 code" in cause


# -- TORCH_CUDA_ARCH_LIST's family entries (a torch whose table names them). CUDA C++
# Programming Guide, family-specific features: compute_100f PTX runs on the members of its
# family (10.0, 10.3), not on a later major, where plain compute_100 PTX JIT-compiles on 12.0.


def test_an_f_entry_of_the_arch_list_is_family_specific() -> None:
    build = TorchBuild("2.99.0+cu130", "13.0", "/t/version.py", ("10.0", "10.0f"), "/t/x.py", ())
    family, plain = parse_arch_list("10.0f+PTX;10.0+PTX", build).entries
    assert (family.variant, family.target, plain.target) == ("f", "compute_100f", "compute_100")
    assert serves(family, resolve_gpu("10.3")) and not serves(family, resolve_gpu("12.0"))
    assert serves(plain, resolve_gpu("12.0"))


# -- flashinfer 0.7.1+ get_nvcc_flags_list: SM 10.7 ("7a") is built as compute_100f only when the
# nvcc it calls does not list compute_107 (_nvcc_supports_sm107); CUDA 13.4 is the first nvcc
# with sm_107 (kb/toolkits.json), 13.3 the last without.


def test_flashinfer_builds_sm_107_itself_with_an_nvcc_that_has_it() -> None:
    rng = kb.flashinfer_range("0.7.4")
    assert rng is not None
    assert build_target(rng, 10, "7a", "13.4") == "compute_107a"
    assert build_target(rng, 10, "7a", "13.3") == "compute_100f"
