"""Run-time compilers: the probe's markers are the knowledge base's, and the JIT rows follow
NVIDIA's PTX rule (CUDA C++ Programming Guide, "Application Compatibility": PTX for compute_XY
is JIT-compiled by the driver for compute capability >= X.Y when the driver knows its PTX ISA;
no compiler emits code for a target older than its oldest). Facts made by hand: pure analysis."""

from __future__ import annotations

from archgap.analysis.jit.runtime_compilers import runtime_compiler_findings
from archgap.analysis.verdicts.compat import ComputeCapability, GpuTarget
from archgap.kb import runtime_compilers as kb
from archgap.probe.binary import rtcompilers
from archgap.probe.facts import BinaryFacts, Distribution, PythonEnvironment, RuntimeCompiler


def test_the_probe_searches_for_the_markers_the_kb_documents() -> None:
    markers = {m.kind: m for m in kb.compiler_markers()}
    assert (markers["nvrtc"].mark, markers["nvrtc"].targets, markers["nvrtc"].version) == (
        rtcompilers.NVRTC_MARK, rtcompilers.NVRTC_ARCH.pattern, rtcompilers.RELEASE.pattern
    )  # fmt: skip
    assert (markers["nvptx"].mark, markers["nvptx"].targets, markers["nvptx"].version) == (
        rtcompilers.NVPTX_MARK, rtcompilers.NVPTX_SM.pattern, rtcompilers.NVPTX_PTX.pattern
    )  # fmt: skip


def rows(
    package: str, compiler: RuntimeCompiler, ccs: list[str], driver: str | None
) -> dict[str | None, tuple[str, str]]:
    lib = f"/site/{package}/lib.so"
    env = PythonEnvironment(
        "/py", "3.11", ("/site",), (Distribution(package, "1.0", "/d", (lib,)),), ()
    )
    binaries = (BinaryFacts(lib, 1, "elf", (), False, compilers=(compiler,)),)
    targets = [GpuTarget(cc, ComputeCapability.parse(cc), "named", "test") for cc in ccs]  # type: ignore[arg-type]
    found = runtime_compiler_findings(env, binaries, targets, driver, "--driver")
    return {f.gpu: (f.status, f.cause) for f in found}


NVPTX_86 = RuntimeCompiler("nvptx", (60, 70, 75, 80, 86), "7.5", None)
NVRTC_134 = RuntimeCompiler("nvrtc", (75, 80, 86, 90, 100, 120, 121), None, "13.4")


def test_an_nvptx_backend_capped_at_sm_86_runs_newer_gpus_through_ptx_jit() -> None:
    got = rows("taichi", NVPTX_86, ["8.6", "9.0", "12.0", "5.0"], "580.65.06")
    assert got["8.6"][0] == "ok" and "sm_86 itself" in got["8.6"][1]
    assert got["9.0"][0] == "ok" and "compute_86" in got["9.0"][1]
    assert got["12.0"][0] == "ok"
    assert got["5.0"][0] == "fails"  # older than its oldest target (sm_60)


def test_nvrtc_ptx_needs_a_driver_that_knows_its_isa() -> None:
    # 8.9 is not in its list: PTX for compute_86, JIT-compiled by the driver for 8.9, whose ISA
    # is 9.4 (NVRTC 13.4); driver 580.65.06 (CUDA 13.0 GA: PTX ISA 9.0 at most) does not know it
    status, cause = rows("warp-lang", NVRTC_134, ["8.9"], None)["8.9"]
    assert status == "ok" and "compute_86" in cause and "9.4" in cause
    status, cause = rows("warp-lang", NVRTC_134, ["8.9"], "580.65.06")["8.9"]
    assert status == "fails" and "9.4" in cause
    assert rows("warp-lang", NVRTC_134, ["7.0"], None)["7.0"][0] == "fails"


def test_no_model_is_unknown_and_nvidias_own_nvrtc_gets_no_row() -> None:
    status, cause = rows("somepkg", NVRTC_134, ["9.0"], None)["9.0"]
    assert status == "unknown" and "NVRTC 13.4" in cause and "not modelled" in cause
    assert rows("nvidia-cuda-nvrtc-cu12", NVRTC_134, ["9.0"], None) == {}


def test_an_nvptx_backend_newer_than_the_drivers_jit_is_not_known_to_fail() -> None:
    # An LLVM NVPTX backend's PTX ISA is the newest it can write, not what the package asks of
    # it (taichi asks for sm_86 at most). On 8.9 (Ada: CUDA 11.8's driver 520 and up) with driver
    # 525.60.13 (CUDA 12.0 GA: the driver JITs PTX ISA 8.0 at most), a backend that can write
    # ISA 8.3 may or may not be refused: unknown, saying both ISAs. NVRTC's ISA is what it
    # writes: the same case with NVRTC fails (test above).
    newer_llvm = RuntimeCompiler("nvptx", (60, 70, 75, 80, 86), "8.3", None)
    status, cause = rows("taichi", newer_llvm, ["8.9"], "525.60.13")["8.9"]
    assert status == "unknown"
    assert "up to 8.3" in cause and "525.60.13 JITs <= 8.0" in cause
