"""Wordings that explain blind set 9 met and no earlier gate read, each printed here as its
source prints it and explained from the log alone. The expectations come from NVIDIA's rules,
never from archgap's output:

- CUDA 13.0 removed sm_50 to sm_72 (its release notes), so a report that a 7.0 GPU is "not
  supported on CUDA 13+" is that drop, and CUDA 12.9 is the last toolkit that still targets it;
  a 7.5 GPU is still a CUDA 13 target, so the same words about it are not this gap;
- Triton's ptxas-blackwell (the second ptxas the triton wheel bundles, triton/knobs.py) is
  Triton's, so a target it rejects is fixed by pointing Triton at a toolkit's ptxas, not by
  building with another nvcc;
- TORCH_CUDA_ARCH_LIST is read by torch's extension builder alone: for a build the log ties to
  no torch, the switch to name is CMake's (or nvcc's -gencode).
"""

from __future__ import annotations

from tests.unit.test_gates import GATES, _explained, _fixes, _printed


def test_a_cuda_release_that_dropped_the_gpu() -> None:
    # CUDA.jl's words on a Tesla V100 (7.0) under an R580 driver
    gate = GATES["any-not-supported-on-cuda"]
    diagnosis = _explained(_printed(gate, "7.0"))
    assert diagnosis.signature == gate.signature_id
    assert "CUDA 13 does not support compute capability 7.0" in diagnosis.root_cause
    assert "CUDA dropped sm_70 after 12.9" in diagnosis.root_cause
    assert "CUDA 12.9 or older" in _fixes(diagnosis)
    # a 7.5 GPU is still a CUDA 13 target: the words do not make it this gap
    assert "does not support" not in _explained(_printed(gate, "7.5")).root_cause


def test_a_minimum_with_an_advice_line_is_read_from_the_requirement_only() -> None:
    # "use a device with at least capability 7.5" is advice; the minimum a line states with
    # "requires" alone is the gate ("the 't' kernel requires 5.0 capability!")
    advice = "Please use a device with at least capability 7.5, or downgrade your driver."
    assert _explained(advice).status != "diagnosed"
    required = "GPU #0: FATAL: the 't' kernel requires 5.0 capability!"
    assert _explained(required).signature == "gate:any-requires-capability"


def test_tritons_ptxas_blackwell_is_tritons() -> None:
    log = "Log said that Cuda capability of sm-110 is not supported\n" + (
        "ptxas-blackwell fatal: Value 'sm_110a' is not defined for option 'gpu-name'\n"
    )
    diagnosis = _explained(log)
    assert "Triton's bundled ptxas" in diagnosis.root_cause
    assert "TRITON_PTXAS_PATH" in _fixes(diagnosis)


def test_a_rebuild_without_torch_in_the_log_names_cmake_only() -> None:
    # GOMC's own CMake build on a GTX 1060 (6.1): nothing in the log is torch
    log = "GPU: NVIDIA GeForce GTX 1060 6GB\nCUDA error: invalid device function\n"
    fixes = _fixes(_explained(log))
    assert "CMAKE_CUDA_ARCHITECTURES=61" in fixes
    assert "TORCH_CUDA_ARCH_LIST" not in fixes
    # the same error from a torch extension keeps torch's switch
    torch_log = "torch 2.3.1+cu121\n" + log
    assert 'TORCH_CUDA_ARCH_LIST="6.1"' in _fixes(_explained(torch_log))
