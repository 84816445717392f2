"""Boundaries of explain's rules, each rule called with the facts a log states.

Expectations from NVIDIA's tables, not from archgap's output (kb/toolkits.json holds them, with
their sources): nvcc builds sm_120 from CUDA 12.8 on, sm_70 up to CUDA 12.9 (13.0 dropped
sm_50-sm_72); PTX ISA 8.7 is first emitted by CUDA 12.8, 8.5 by 12.5; SASS sm_XY runs on X.Z for
Z >= Y (so a build's own capability runs); a Tegra GPU (Orin 8.7) runs no desktop SASS;
TensorRT 9.1 is the last release that builds SM 6.1 (TensorRT#3826), so 9.1 has not dropped it.
A toolkit exactly at a target's first or last CUDA builds it: it is neither too old nor too new.
"""

from __future__ import annotations

from archgap.analysis.explain.rules.capability import capability_gate
from archgap.analysis.explain.rules.facts import CONDITIONAL, DETERMINED, NVCC, PTXAS, LogFacts
from archgap.analysis.explain.rules.kernel_image import no_kernel_image
from archgap.analysis.explain.rules.nvrtc import cupy_compiles
from archgap.analysis.explain.rules.ptx import _cuda_of_isa
from archgap.analysis.explain.rules.tensorrt import tensorrt
from archgap.analysis.explain.rules.toolkit import toolkit_target
from archgap.analysis.explain.rules.torch_archs import torch_archs
from archgap.kb import toolchain as kb


def facts(
    cc: str,
    toolkit: str | None = None,
    torch_cuda: str | None = None,
    tool: str = "",
    tegra: bool = False,
    **stated: str,
) -> LogFacts:
    said: dict[str, tuple[str, ...]] = {k: (v,) for k, v in stated.items()}
    return LogFacts(tool, toolkit, (cc,), "", tegra, None, said, (), torch_cuda)


# -- torch built with a CUDA, its arch list not logged (the target's first and last CUDA)


def test_torch_built_with_exactly_a_targets_first_cuda_is_not_older() -> None:
    at = torch_archs(facts("12.0", torch_cuda="12.8"))
    assert at is not None and at.status == CONDITIONAL and "older than" not in at.cause
    below = torch_archs(facts("12.0", torch_cuda="12.6"))
    assert below is not None and below.status == DETERMINED
    assert "CUDA 12.6, older than sm_120" in below.cause


def test_torch_built_with_exactly_a_targets_last_cuda_has_not_dropped_it() -> None:
    at = torch_archs(facts("7.0", torch_cuda="12.9"))
    assert at is not None and at.status == CONDITIONAL
    above = torch_archs(facts("7.0", torch_cuda="13.0"))
    assert above is not None and above.status == DETERMINED
    assert "built with CUDA 13.0" in above.cause and "12.9" in above.cause


# -- torch's arch list logged


def test_a_build_for_the_gpus_own_capability_is_no_gap() -> None:
    ruling = torch_archs(facts("9.0", torch_archs="sm_90"))
    assert ruling is not None and ruling.cause.startswith("no gap: this torch has sm_90 SASS")


def test_a_tegra_gpu_is_not_served_by_desktop_sass_of_its_major() -> None:
    ruling = torch_archs(facts("8.7", tegra=True, torch_archs="sm_80 sm_86"))
    assert ruling is not None and not ruling.cause.startswith("no gap")


def test_a_gpu_at_the_oldest_built_capability_is_not_older_than_it() -> None:
    ruling = torch_archs(facts("8.7", tegra=True, torch_archs="sm_87 sm_90"))
    assert ruling is not None and "older than the oldest" not in ruling.cause


# -- a package's capability check ("compute capability >= X.Y")


def test_a_gpu_exactly_at_a_packages_minimum_is_not_older() -> None:
    error = "RuntimeError: this kernel requires compute capability >= 8.0"
    at = capability_gate(error, facts("8.0", package="somepkg"))
    assert at is not None and "the GPU is older" not in at.cause
    below = capability_gate(error, facts("7.5", package="somepkg"))
    assert below is not None and "needs compute capability >= 8.0; the GPU is older" in below.cause


# -- a compiler rejecting a target


def test_nvcc_exactly_at_a_targets_first_cuda_is_not_older() -> None:
    error = "nvcc fatal   : Unsupported gpu architecture 'compute_120'"
    at = toolkit_target(error, facts("12.0", toolkit="12.8", tool=NVCC), NVCC)
    assert at is not None and "older than" not in at.cause
    below = toolkit_target(error, facts("12.0", toolkit="12.6", tool=NVCC), NVCC)
    assert below is not None and "nvcc is CUDA 12.6, older than sm_120" in below.cause


def test_nvcc_exactly_at_a_targets_last_cuda_is_not_newer() -> None:
    error = "nvcc fatal   : Unsupported gpu architecture 'compute_70'"
    at = toolkit_target(error, facts("7.0", toolkit="12.9", tool=NVCC), NVCC)
    assert at is not None and "newer than" not in at.cause
    above = toolkit_target(error, facts("7.0", toolkit="13.0", tool=NVCC), NVCC)
    assert above is not None and "nvcc is CUDA 13.0, newer than sm_70" in above.cause


def test_cupys_nvrtc_exactly_at_the_first_cuda_for_the_gpu_builds_it() -> None:
    at = cupy_compiles(facts("12.0", toolkit="12.8"))
    assert at is not None and "the NVRTC of CUDA 12.8 builds it" in at.cause
    below = cupy_compiles(facts("12.0", toolkit="12.6"))
    assert below is not None and "needs an NVRTC from CUDA >= 12.8" in below.cause


def test_the_toolkit_that_first_emits_a_ptx_isa() -> None:
    first = _cuda_of_isa("8.7")
    assert first is not None and first.cuda == "12.8"
    at_85 = _cuda_of_isa("8.5")
    assert at_85 is not None and at_85.cuda == "12.5"


def test_tensorrts_last_release_for_a_gpu_has_not_dropped_it() -> None:
    # 9.1 builds SM 6.1 by the table, so the support table explains nothing: neither "dropped"
    # nor "predates" (the rule leaves the gate to its other causes)
    assert tensorrt(facts("6.1", tensorrt="9.1")) is None
    assert tensorrt(facts("8.9", tensorrt="8.5")) is None  # 8.5 is Ada's first release
    before = tensorrt(facts("8.9", tensorrt="8.4"))
    assert before is not None and "predates SM 8.9" in before.cause
    after = tensorrt(facts("6.1", tensorrt="10.0.1"))
    assert after is not None and "dropped SM 6.1" in after.cause


# -- a target long dropped (kb/toolkits.json "long_dropped": its last toolkit older than CUDA
# 12.0). CUDA 12.0's release notes removed Kepler (sm_35, sm_37): their last toolkit is 11.8;
# CUDA 13.0 removed sm_50-sm_72: their last toolkit is 12.9, newer than the threshold.


def test_long_dropped_is_a_last_toolkit_older_than_the_threshold() -> None:
    assert kb.long_dropped("11.8")  # just below 12.0
    assert not kb.long_dropped("12.0")  # at it: not older
    assert not kb.long_dropped("12.9")  # above it
    assert not kb.long_dropped(None)  # not dropped at all


def test_a_kepler_gpu_is_one_current_builds_leave_out() -> None:
    ruling = no_kernel_image(facts("3.7"))
    assert ruling is not None and ruling.status == DETERMINED
    assert ruling.cause == (
        "the failing package no longer ships sm_37 (the GPU: 3.7): CUDA 12.0 dropped it (the "
        "last toolkit that builds it is 11.8), so current builds leave it out"
    )
    assert "built with CUDA <= 11.8 that still ships sm_37" in ruling.fixes[0].action


def test_a_maxwell_gpu_still_gets_a_build_that_contains_its_sass() -> None:
    # sm_50's last toolkit is 12.9, not older than 12.0: a build with sm_50 is the fix
    ruling = no_kernel_image(facts("5.0"))
    assert ruling is not None and ruling.status == CONDITIONAL
    assert "no longer ships" not in ruling.cause
    assert ruling.fixes[0].action.startswith("install a build of the failing package that "
                                             "contains sm_50")  # fmt: skip


def test_ptxas_rejecting_a_long_dropped_target_is_newer_than_its_last_toolkit() -> None:
    error = "ptxas fatal   : Value 'sm_37' is not defined for option 'gpu-name'"
    ruling = toolkit_target(error, facts("9.0", tool=PTXAS), PTXAS)
    assert ruling is not None and ruling.status == CONDITIONAL and not ruling.cases
    assert ruling.cause.startswith(
        "CUDA 12.0 dropped sm_37 (the last toolkit that builds it is 11.8); the ptxas in use is "
        "newer than that"
    )


def test_ptxas_rejecting_a_target_dropped_by_13_0_is_either_too_new_or_too_old() -> None:
    # sm_50: built by CUDA 8.0 (the table's first release) to 12.9; the log names no toolkit
    error = "ptxas fatal   : Value 'sm_50' is not defined for option 'gpu-name'"
    ruling = toolkit_target(error, facts("9.0", tool=PTXAS), PTXAS)
    assert ruling is not None and ruling.status == CONDITIONAL
    assert [c.when for c in ruling.cases] == ["if ptxas is CUDA > 12.9", "if ptxas is CUDA < 8.0"]
