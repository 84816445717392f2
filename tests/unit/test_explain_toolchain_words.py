"""explain on the toolchain's own words (issue 39): arch tokens that name no architecture, the
toolkit table's family-specific targets and PTX ISA per release.

Expectations come from NVIDIA's documentation, cited per test, never from archgap's output:
- nvcc's option reference, --gpu-architecture (-arch): its values are compute_XY / sm_XY (with an
  'a' or 'f' suffix) and the special values `native` (CUDA 11.6), `all` and `all-major` (CUDA
  11.5); https://docs.nvidia.com/cuda/cuda-compiler-driver-nvcc/index.html#gpu-architecture-arch
"""

from __future__ import annotations

import pytest

from archgap.analysis.explain.diagnosis import Diagnosis, explain
from archgap.analysis.explain.logparse import parse_log
from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.kb import toolchain as kb
from archgap.kb.signatures import load_signatures


def _explain(text: str, gpus: tuple[str, ...] = ()) -> Diagnosis:
    named = tuple(resolve_gpu(g) for g in gpus)
    return explain(parse_log(text), load_signatures(), None, named)


def _fixes(d: Diagnosis) -> str:
    return " | ".join(f.text for f in d.fixes)


# A token no CUDA release defines as a target (nvcc's option reference lists compute_XY / sm_XY
# only): DeepSpeed's op_builder turning a capability or TORCH_CUDA_ARCH_LIST entry into
# `compute_1.`, an empty version giving `sm_` / `compute_`.
NOT_AN_ARCH = [
    pytest.param(
        "nvcc fatal   : Unsupported gpu architecture 'compute_1.'", "compute_1.", id="compute_1."
    ),
    pytest.param(
        "nvcc fatal   : Unsupported gpu architecture 'compute_'", "compute_", id="compute_"
    ),
    pytest.param("nvcc fatal   : Unsupported gpu architecture 'sm_'", "sm_", id="sm_"),
    pytest.param(
        "ptxas fatal   : Value 'sm_' is not defined for option 'gpu-name'", "sm_", id="ptxas-sm_"
    ),
    # nvcc's special values: valid for nvcc -arch from 11.6 (native) / 11.5 (all), never targets
    pytest.param(
        "nvcc fatal   : Value 'native' is not defined for option 'gpu-architecture'",
        "native",
        id="value-native",
    ),
    pytest.param("nvcc fatal   : Unsupported gpu architecture 'all'", "all", id="all"),
]


@pytest.mark.parametrize(("log", "token"), NOT_AN_ARCH)
def test_an_arch_token_that_is_no_architecture_is_the_build_scripts(log: str, token: str) -> None:
    d = _explain(log + "\nCuda compilation tools, release 11.3, V11.3.109", ("RTX 3090",))
    assert d.status == "diagnosed"
    assert f"'{token}'" in d.root_cause
    assert "build" in d.root_cause and "older than" not in d.root_cause
    # no toolkit switch: the fix is an explicit arch list for the GPU (RTX 3090: 8.6)
    assert all(f.kind != "toolkit" for f in d.fixes), _fixes(d)
    assert 'TORCH_CUDA_ARCH_LIST="8.6"' in _fixes(d)


def test_a_real_target_is_still_the_toolkits_age() -> None:
    """compute_120 is a target (CUDA 12.8 adds it): an nvcc 12.6 predates it, as before."""
    d = _explain(
        "nvcc fatal   : Unsupported gpu architecture 'compute_120'\n"
        "Cuda compilation tools, release 12.6, V12.6.85"
    )
    assert "older than sm_120" in d.root_cause
    assert "CUDA >= 12.8" in _fixes(d)


# ---------------------------------------------------------------- the toolkit table, from NVIDIA

# NVIDIA's PTX ISA release notes, the table "PTX ISA version -> CUDA release"
# (https://docs.nvidia.com/cuda/parallel-thread-execution/#release-notes-ptx-release-history):
# PTX ISA 8.5 is CUDA 12.5 and 12.6 (12.6 added no ISA), 8.6 is CUDA 12.7 (never released as a
# toolkit), 8.7 CUDA 12.8, 8.8 CUDA 12.9, 9.0 CUDA 13.0.
DOCUMENTED_PTX_ISA = {
    "8.0": "5.0",
    "9.0": "6.0",
    "9.1": "6.1",
    "9.2": "6.2",
    "10.0": "6.3",
    "10.1": "6.4",
    "10.2": "6.5",
    "11.0": "7.0",
    "11.1": "7.1",
    "11.2": "7.2",
    "11.3": "7.3",
    "11.4": "7.4",
    "11.5": "7.5",
    "11.6": "7.6",
    "11.7": "7.7",
    "11.8": "7.8",
    "12.0": "8.0",
    "12.1": "8.1",
    "12.2": "8.2",
    "12.3": "8.3",
    "12.4": "8.4",
    "12.5": "8.5",
    "12.6": "8.5",
    "12.8": "8.7",
    "12.9": "8.8",
    "13.0": "9.0",
    "13.1": "9.1",
}


@pytest.mark.parametrize(("cuda", "isa"), DOCUMENTED_PTX_ISA.items(), ids=DOCUMENTED_PTX_ISA)
def test_the_ptx_isa_of_each_release_is_nvidias_table(cuda: str, isa: str) -> None:
    release = kb.toolkit_release(cuda)
    assert release is not None, cuda
    assert release.ptx_isa == isa
    assert release.source  # each entry names where its values come from


def test_no_release_claims_ptx_isa_8_6() -> None:
    """8.6 belongs to CUDA 12.7, which was never released: 12.6 emits 8.5, 12.8 emits 8.7."""
    assert all(r.ptx_isa != "8.6" for r in kb.toolkit_releases())


# CUDA 12.9 release notes: family-specific targets ('f' suffix: sm_100f, sm_101f, sm_103f,
# sm_120f, sm_121f) are new in 12.9 (https://docs.nvidia.com/cuda/archive/12.9.0/
# cuda-toolkit-release-notes/index.html); sm_100 / sm_120 themselves arrive in CUDA 12.8.
FAMILY = ["sm_100f", "sm_101f", "sm_103f", "sm_120f", "sm_121f"]


@pytest.mark.parametrize("target", FAMILY)
def test_family_targets_arrive_in_cuda_12_9(target: str) -> None:
    span = kb.toolkit_range_for(target)
    assert span is not None and span[0] == "12.9"


@pytest.mark.parametrize("target", ["sm_100f", "sm_120f"])
def test_an_nvcc_12_8_is_older_than_a_family_target(target: str) -> None:
    """nvcc 12.8 rejects compute_100f: the chain says 12.9, the fix says 12.9 (the rule read the
    plain sm_100's 12.8 before, and blamed another nvcc on PATH)."""
    d = _explain(
        f"nvcc fatal   : Unsupported gpu architecture 'compute_{target[3:]}'\n"
        "Cuda compilation tools, release 12.8, V12.8.61"
    )
    assert f"older than {target}" in d.root_cause and "CUDA >= 12.9" in d.root_cause
    assert "CUDA >= 12.9" in _fixes(d) and "12.8 nvcc first" not in _fixes(d)


# ---------------------------------------------------------------- Triton's own version table

# triton 3.4.0, triton/backends/nvidia/compiler.py:62 (ptx_get_version, after mapping majors
# 12, 11 and 10): raise RuntimeError("Triton only support CUDA 10.0 or higher, but got CUDA
# version: " + cuda_version). 3.5.0 adds "if major >= 13" (line 64) before the same raise.
TRITON_34_RAISE = "Triton only support CUDA 10.0 or higher, but got CUDA version: "


@pytest.mark.parametrize("cuda", ["13.0", "12.8"])
def test_tritons_version_table_is_tritons_not_the_toolkits(cuda: str) -> None:
    d = _explain(f"RuntimeError: {TRITON_34_RAISE}{cuda}")
    assert d.signature == "triton-ptx-version-table"
    assert "Triton" in d.root_cause and "toolkit itself is fine" in d.root_cause
    assert any(f.kind == "upgrade" and "triton >= 3.5.0" in f.text for f in d.fixes)
    assert all(f.kind != "toolkit" for f in d.fixes)
