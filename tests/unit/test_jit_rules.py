"""Pure JIT rules over hand-made facts and the kb helpers. Expectations come from the packages'
code (stack_gates.md) and the CUDA tables (arch_kb.md), not from archgap's output."""

from __future__ import annotations

from dataclasses import replace

import pytest

from archgap.analysis.fixes.flashinfer_rules import parse_flashinfer_arch_list
from archgap.analysis.jit.compilers import jit_findings
from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.kb import toolchain as kb
from archgap.probe.facts import EnvVar, InstalledPackage, ToolchainFacts, Toolkit, TorchBuild


@pytest.mark.parametrize(
    ("cuda", "target", "ok"),
    [
        ("12.8", "sm_120a", True),
        ("12.8", "compute_120", True),
        ("12.8", "compute_120f", False),  # family targets start with 12.9
        ("12.9", "compute_120f", True),
        ("12.8", "compute_103a", False),  # sm_103 first in 12.9
        ("12.9", "compute_103a", True),
        ("12.9", "sm_121a", True),
        ("12.6", "sm_120", False),
        ("12.9", "sm_70", True),
        ("13.0", "sm_70", False),  # CUDA 13 removed Maxwell/Pascal/Volta
        ("13.0", "sm_101a", False),  # renamed sm_110a
        ("13.0", "sm_110a", True),
        ("12.8", "bogus", False),
    ],
)
def test_toolkit_can_target(cuda: str, target: str, ok: bool) -> None:
    assert kb.toolkit_can_target(cuda, target) is ok


@pytest.mark.parametrize(
    ("driver", "isa"),
    [
        ("570.86.10", "8.7"),
        ("575.51.03", "8.8"),
        ("580.65.06", "9.0"),
        ("580.65.05", "8.8"),
        ("560.35.03", "8.5"),
        ("440.33.01", "6.5"),  # CUDA 10.2 (Table 3: >= 440.33)
        ("384.80", None),  # below CUDA 9.0's 384.81: before the table's first minimum
        ("garbage", None),
    ],
)
def test_max_ptx_isa_for_driver(driver: str, isa: str | None) -> None:
    assert kb.max_ptx_isa_for_driver(driver) == isa


def test_minor_version_compatibility() -> None:
    assert kb.driver_runs_runtime("575.57.08", "12.8")[0] is True
    assert kb.driver_runs_runtime("535.104.05", "12.8")[0] is True  # 12.x on >= 525
    assert kb.driver_runs_runtime("570.86.10", "13.0")[0] is False  # 13.x needs >= 580


def test_flashinfer_arch_list_parser() -> None:
    rng = kb.flashinfer_range("0.6.8")
    assert rng is not None
    assert parse_flashinfer_arch_list("12.0a", rng, "12.8").archs == ((12, "0a"),)
    assert parse_flashinfer_arch_list("8.0 9.0", rng, "12.8").archs == ((8, "0"), (9, "0a"))
    assert parse_flashinfer_arch_list("8.0;9.0", rng, "12.8").error == (
        "ValueError: too many values to unpack (expected 2)"
    )
    assert parse_flashinfer_arch_list("12.0", rng, "12.8").error == (
        "RuntimeError: SM 12.x requires CUDA >= 12.9"
    )
    assert parse_flashinfer_arch_list("12", rng, "12.8").error == (
        "ValueError: not enough values to unpack (expected 2, got 1)"
    )


def facts(
    flashinfer: str | None = "0.6.8",
    cuda_home: str = "/opt/cuda",
    nvcc: str | None = "12.8",
    status: str = "ok",
    extra_env: tuple[EnvVar, ...] = (),
    extra_toolkits: tuple[Toolkit, ...] = (),
    torch_cuda: str | None = None,
    triton: str | None = None,
) -> ToolchainFacts:
    tk = Toolkit(
        cuda_home,
        "CUDA_HOME",
        "env CUDA_HOME (svc.env)",
        "nvcc",
        f"{cuda_home}/bin/nvcc",
        status,
        nvcc if status == "ok" else None,
        None,
        f"`{cuda_home}/bin/nvcc --version`",
        None if status == "ok" else "reason",
    )
    packages = []
    if flashinfer:
        packages.append(InstalledPackage("flashinfer-python", flashinfer, "/site/fi.dist-info"))
    if triton:
        packages.append(InstalledPackage("triton", triton, "/site/triton.dist-info"))
    torch = TorchBuild("2.9.0+cu130", torch_cuda, "/site/torch/version.py") if torch_cuda else None
    return ToolchainFacts(
        "svc.env",
        (EnvVar("CUDA_HOME", cuda_home, "svc.env"), *extra_env),
        None,
        (tk, *extra_toolkits),
        tuple(packages),
        torch,
        (),
        (),
    )


def findings(f: ToolchainFacts, gpu: str):  # type: ignore[no-untyped-def]
    return [x for x in jit_findings(f, [resolve_gpu(gpu)]) if x.package == "flashinfer-python"]


def test_source_not_confirmed_downgrades_to_unknown() -> None:
    # No source checks reported at all: the rule cannot be confirmed in the installed code.
    (finding,) = findings(facts(), "RTX PRO 6000")
    assert finding.status == "unknown"
    assert "Not confirmed" in finding.cause


def test_nvcc_timeout_means_flashinfer_hangs() -> None:
    (finding,) = findings(facts(status="timeout"), "B200")
    assert "never returns" in finding.cause


def test_missing_nvcc_falls_back_to_torch_cuda() -> None:
    got = findings(facts(status="missing", torch_cuda="12.9"), "RTX PRO 6000")
    # torch 12.9 passes the gate, but there is no nvcc to build with: the CUDA_HOME is named.
    assert got and "no nvcc found" not in got[0].cause
    assert "CUDA_HOME=/opt/cuda has no bin/nvcc: nothing can build there" in got[0].cause
    assert any("falls back to torch.version.cuda = 12.9" in c.what for c in got[0].chain)


def test_arch_list_that_misses_the_gpu() -> None:
    env = (EnvVar("FLASHINFER_CUDA_ARCH_LIST", "9.0a", "svc.env"),)
    (finding,) = findings(facts(extra_env=env), "RTX PRO 6000")
    assert finding.error == "CUDA error: no kernel image is available for execution on the device"


def test_triton_bundled_ptxas_too_old_for_gb10() -> None:
    ptxas = Toolkit(
        "/site/triton/backends/nvidia/bin",
        "triton",
        "bundled with triton",
        "ptxas",
        "/site/triton/backends/nvidia/bin/ptxas",
        "ok",
        "12.8",
        "12.8.93",
        "`ptxas --version`",
    )
    newer = Toolkit(
        "/usr/local/cuda-13.0",
        "/usr/local/cuda-*",
        "directory listing",
        "nvcc",
        "/usr/local/cuda-13.0/bin/nvcc",
        "ok",
        "13.0",
        "13.0.88",
        "`nvcc --version`",
    )
    f = facts(flashinfer=None, triton="3.5.0", extra_toolkits=(ptxas, newer))
    (finding,) = [x for x in jit_findings(f, [resolve_gpu("GB10")]) if x.package == "triton"]
    assert finding.status == "fails"
    assert "ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'" in (
        finding.error or ""
    )
    assert finding.fixes[0].env == (("TRITON_PTXAS_PATH", "/usr/local/cuda-13.0/bin/ptxas"),)
    # checked and works: said so (ptxas 12.8 knows sm_90a)
    (h100,) = [x for x in jit_findings(f, [resolve_gpu("H100")]) if x.package == "triton"]
    assert h100.status == "ok" and "ptxas 12.8 assembles sm_90a" in h100.cause


def ptxas(home: str, version: str, tool: str = "ptxas", found_by: str = "triton") -> Toolkit:
    return Toolkit(home, found_by, "test", tool, f"{home}/bin/{tool}", "ok", version, None, "t")


def triton_with_a_cuda_118_toolkit() -> ToolchainFacts:
    """Facts of triton 3.5.0 with its bundled ptxas 12.8 and a CUDA 11.8 toolkit beside it."""
    bundled = ptxas("/site/triton/backends/nvidia", "12.8")
    cuda118 = ptxas("/usr/local/cuda-11.8", "11.8", "nvcc", "/usr/local/cuda-*")
    return facts(flashinfer=None, triton="3.5.0", extra_toolkits=(bundled, cuda118))


def test_triton_ptxas_newer_than_the_driver() -> None:
    # pytorch#119054: triton's bundled ptxas 12.x with a 470 driver (CUDA 11.4): the driver
    # rejects its cubins; CUDA 12.x needs >= 525 even with minor-version compatibility, and a
    # CUDA 11.8 ptxas (11.x runs on >= 450.80.02) fixes it.
    f = triton_with_a_cuda_118_toolkit()
    got = jit_findings(f, [resolve_gpu("A100")], driver_version="470.57.02")
    (finding,) = [x for x in got if x.package == "triton"]
    assert finding.status == "fails"
    assert finding.error == "RuntimeError: Triton Error [CUDA]: device kernel image is invalid"
    assert finding.fixes[0].env == (("TRITON_PTXAS_PATH", "/usr/local/cuda-11.8/bin/ptxas"),)
    fine = jit_findings(f, [resolve_gpu("A100")], driver_version="580.65.06")
    assert [x.status for x in fine if x.package == "triton"] == ["ok"]


def test_triton_below_its_supported_minimum() -> None:
    # README: NVIDIA GPUs of compute capability 8.0+ (PR #5066: FMA fallback below 8.0);
    # torch/_inductor refuses below 7.0.
    f = facts(flashinfer=None, triton="3.5.0", extra_toolkits=(ptxas("/t", "12.8"),))
    (v100,) = [x for x in jit_findings(f, [resolve_gpu("V100")]) if x.package == "triton"]
    assert v100.status == "unknown" and "FMA" in v100.cause
    (p100,) = [x for x in jit_findings(f, [resolve_gpu("P100")]) if x.package == "triton"]
    assert p100.status == "fails" and "CUDA Capability >= 7.0" in (p100.error or "")


def test_torch_extension_major_mismatch() -> None:
    f = facts(flashinfer=None, nvcc="12.8", torch_cuda="13.0")
    (finding,) = [
        x for x in jit_findings(f, [resolve_gpu("H100")]) if x.package.startswith("torch")
    ]
    assert finding.error == (
        "RuntimeError: The detected CUDA version (12.8) mismatches the version that was used to "
        "compile PyTorch (13.0). Please make sure to use the same CUDA versions."
    )


def test_torch_runtime_needs_newer_driver() -> None:
    f = facts(flashinfer=None, nvcc="13.0", torch_cuda="13.0")
    got = jit_findings(f, [resolve_gpu("H100")], driver_version="570.86.10")
    (finding,) = [x for x in got if x.package == "torch"]
    assert finding.error == "CUDA driver version is insufficient for CUDA runtime version"


@pytest.mark.parametrize(
    ("torch_version", "arch_list", "rejected"),
    [
        # torch's parser has no family names; 12.1/12.1a came in torch 2.13 (stack_gates.md 4.1).
        ("2.9.0+cu130", "9.0;12.0+PTX", None),  # compute_120 PTX JITs on GB10's 12.1
        ("2.9.0+cu130", "9.0 12.0f", "12.0f"),
        ("2.9.0+cu130", "12.1a+PTX", "12.1a"),
        ("2.13.0+cu130", "12.1a+PTX", None),
    ],
)
def test_torch_arch_list_names_from_the_kb_when_torch_has_no_readable_list(
    torch_version: str, arch_list: str, rejected: str | None
) -> None:
    env = (EnvVar("TORCH_CUDA_ARCH_LIST", arch_list, "svc.env"),)
    f = replace(
        facts(flashinfer=None, nvcc="13.0", extra_env=env),
        torch=TorchBuild(torch_version, "13.0", "/site/torch/version.py"),
    )
    got = [x for x in jit_findings(f, [resolve_gpu("GB10")]) if x.package.startswith("torch")]
    if rejected is None:
        assert got == []
        return
    (finding,) = got
    # Without the installed torch's own list the kb's list only makes it "unknown".
    assert finding.status == "unknown" and not finding.gates_exit_code
    assert finding.error == f"ValueError: Unknown CUDA arch ({rejected}) or GPU not supported"
