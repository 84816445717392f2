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
