"""Wordings that explain blind sets 9 and 10 met and no earlier gate read, each printed here as its
source prints it and explained from the log alone. The expectations come from NVIDIA's rules,
never from archgap's output:

- CUDA 13.0 removed sm_50 to sm_72 (its release notes), so a report that a 7.0 GPU is "not
  supported on CUDA 13+" is that drop, and CUDA 12.9 is the last toolkit that still targets it;
  a 7.5 GPU is still a CUDA 13 target, so the same words about it are not this gap;
- Triton's ptxas-blackwell (the second ptxas the triton wheel bundles, triton/knobs.py) is
  Triton's, so a target it rejects is fixed by pointing Triton at a toolkit's ptxas, not by
  building with another nvcc;
- TORCH_CUDA_ARCH_LIST is read by torch's extension builder alone: for a build the log ties to
  no torch, the switch to name is CMake's (or nvcc's -gencode);
- a release that says a GPU is not supported *yet* is older than the GPU: a later release serves
  it (NVIDIA's framework containers list the GPUs of each release in their support matrix);
- TensorRT releases before Blackwell assert that the SM major is below 10: a 12.0 GPU needs the
  first TensorRT that supports SM 12.0 (10.8, TensorRT's support matrix, kb/tensorrt.json).
"""

from __future__ import annotations

import pytest

from tests.unit.test_gates import GATES, _explained, _fixes, _printed


def test_a_cuda_release_that_dropped_the_gpu() -> None:
    # CUDA.jl's words on a Tesla V100 (7.0) under an R580 driver
    gate = GATES["any-not-supported-on-cuda"]
    diagnosis = _explained(_printed(gate, "7.0"))
    assert diagnosis.signature == gate.signature_id
    assert "CUDA 13 does not support compute capability 7.0" in diagnosis.root_cause
    assert "CUDA dropped sm_70 after 12.9" in diagnosis.root_cause
    assert "CUDA 12.9 or older" in _fixes(diagnosis)
    # a 7.5 GPU is still a CUDA 13 target, and CUDA 12 still targets 7.0 (to 12.9): the words
    # do not make either this gap
    assert "does not support" not in _explained(_printed(gate, "7.5")).root_cause
    on_12 = _printed(gate, "7.0").replace("CUDA 13+", "CUDA 12+")
    assert "does not support" not in _explained(on_12).root_cause


def test_a_minimum_with_an_advice_line_is_read_from_the_requirement_only() -> None:
    # "use a device with at least capability 7.5" is advice; the minimum a line states with
    # "requires" alone is the gate ("the 't' kernel requires 5.0 capability!")
    advice = "Please use a device with at least capability 7.5, or downgrade your driver."
    assert _explained(advice).status != "diagnosed"
    required = "GPU #0: FATAL: the 't' kernel requires 5.0 capability!"
    assert _explained(required).signature == "gate:any-requires-capability"


def test_a_rebuild_without_torch_in_the_log_names_cmake_only() -> None:
    # GOMC's own CMake build on a GTX 1060 (6.1): nothing in the log is torch
    log = "GPU: NVIDIA GeForce GTX 1060 6GB\nCUDA error: invalid device function\n"
    fixes = _fixes(_explained(log))
    assert "CMAKE_CUDA_ARCHITECTURES=61" in fixes
    assert "TORCH_CUDA_ARCH_LIST" not in fixes
    # the same error from a torch extension keeps torch's switch
    torch_log = "torch 2.3.1+cu121\n" + log
    assert 'TORCH_CUDA_ARCH_LIST="6.1"' in _fixes(_explained(torch_log))


def test_not_yet_supported_names_a_later_release_and_without_the_gpu_asks_for_it() -> None:
    thor = "I run max serve on my Jetson Thor\n" + _printed(GATES["any-not-yet-supported"], "11.0")
    diagnosis = _explained(thor)
    assert diagnosis.signature == "gate:any-not-yet-supported"
    assert "predates the GPU (" in diagnosis.root_cause and "11.0)" in diagnosis.root_cause
    unnamed = _explained("RuntimeError: This GPU is not yet supported")
    assert unnamed.cause_status == "conditional" and "later release" in _fixes(unnamed)
    # a feature or a count of GPUs that is not supported says nothing of the GPU's age
    for words in (
        "Multi-GPU training is not currently supported",
        "bf16 on this GPU is not currently supported",
    ):
        assert _explained(words).signature != "gate:any-not-yet-supported"


def test_an_invalid_kernel_image_after_nvrtc_rejected_the_target_is_that_nvrtc() -> None:
    # xmrig-nvidia 2.14.4 with CUDA 9.0's NVRTC on an RTX 2060 (7.5): sm_75 needs CUDA >= 10.0
    log = (
        " * LIBS         libuv/1.29.1 CUDA/9.0\n"
        " * GPU #0       PCI:0000:01:00 GeForce RTX 2060 @ 1200/7001 MHz arch:75\n"
        "Program compile log: nvrtc: error: invalid value for --gpu-architecture (-arch)\n"
        '[CUDA] Error gpu 0: <cryptonight_gpu_hash>:878 "device kernel image is invalid"\n'
    )
    diagnosis = _explained(log)
    assert "NVRTC" in diagnosis.root_cause and "CUDA >= 10.0" in diagnosis.root_cause
    assert "TRITON_PTXAS_PATH" not in _fixes(diagnosis)


def test_a_dropped_target_without_torch_in_the_log_names_no_torch_switch() -> None:
    # CUDA 11.0 removed sm_30: a CMake list that still names compute_30 fails under nvcc 11.2
    log = "nvcc --version: Cuda compilation tools, release 11.2, V11.2.152\n" + (
        "nvcc fatal   : Unsupported gpu architecture 'compute_30'\n"
    )
    fixes = _fixes(_explained(log))
    assert "remove sm_30 from the build's arch list" in fixes
    assert "TORCH_CUDA_ARCH_LIST" not in fixes
    assert "TORCH_CUDA_ARCH_LIST" in _fixes(_explained("torch 1.8.1+cu111\n" + log))


def test_an_instruction_newer_than_the_gpu_is_the_gpu_not_the_arch_list() -> None:
    # PTX ISA: mma .m16n8k16 with bf16 needs sm_80. A Tesla T4 (7.5) is older: no arch list
    # helps. An RTX 3090 (8.6) is new enough: the build also named an older target.
    ptxas = (
        "ptxas gemm.ptx, line 709; error   : Feature '.m16n8k16' requires .target sm_80 or higher"
    )
    older = _explained("GPU: NVIDIA Tesla T4\n" + ptxas)
    assert "older than sm_80" in older.root_cause and "7.5" in older.root_cause
    assert "code path without these kernels" in _fixes(older)
    newer = _explained("GPU: NVIDIA GeForce RTX 3090\n" + ptxas)
    assert "names a target older than sm_80" in newer.root_cause
    assert "arch=compute_86,code=sm_86" in _fixes(newer)
    assert "TORCH_CUDA_ARCH_LIST" not in _fixes(newer)  # nothing in the log is torch


# One wording each, as its source prints it: (the log, the signature, what the cause must say,
# what the fixes must say, what neither may say). Why each expectation holds:
WORDINGS = {
    # triton/knobs.py names its second bundled ptxas "ptxas-blackwell": a target it rejects is
    # Triton's ptxas's gap, fixed by pointing Triton at a toolkit's ptxas
    "triton-ptxas-blackwell": (
        "Log said that Cuda capability of sm-110 is not supported\n"
        "ptxas-blackwell fatal: Value 'sm_110a' is not defined for option 'gpu-name'\n",
        "ptxas-unknown-gpu-name",
        ("Triton's bundled ptxas",),
        ("TRITON_PTXAS_PATH",),
        (),
    ),
    # an NGC container that does not list an RTX 4090 (8.9) yet predates it: a later release
    "ngc-container": (
        _printed(GATES["ngc-container-not-yet-supported"], "8.9"),
        "gate:ngc-container-not-yet-supported",
        ("predates the GPU (NVIDIA GeForce RTX 4090, 8.9)",),
        ("later release of NVIDIA's NGC container that supports compute capability 8.9",),
        (),
    ),
    # TensorRT before Blackwell asserts the SM major is below 10; SM 12.0 from TensorRT 10.8
    "tensorrt-smverhex2dig": (
        "TensorRT backend thread 0: Found GPU NVIDIA GeForce RTX 5090 memory 34190458880\n"
        "TensorRT backend: 2: [helpers.h::nvinfer1::smVerHex2Dig::694] Error Code 2: Internal "
        "Error (Assertion major >= 0 && major < 10 failed. )\n",
        "tensorrt-unsupported-sm",
        ("12.0", "10.8"),
        (),
        (),
    ),
    # HOOMD-blue's scanGPUs excludes major*10+minor below CUDA_ARCH, the build's lowest target:
    # a Tesla K80 (3.7) is older than every target; HOOMD's CPU device still runs
    "hoomd-scan-gpus": (
        _printed(GATES["hoomd-below-build-arch"], "3.7"),
        "gate:hoomd-below-build-arch",
        ("no code for compute capability 3.7 or below",),
        ("the CPU",),
        ("rebuild",),
    ),
    # kokkos/kokkos#1944: "compiled for compute capability 0.0 (< 5.0)": 0.0 is no architecture
    # (the test kernel did not run), so the GPU is no target of the build
    "kokkos-zero-arch": (
        "Kokkos::Cuda::initialize ERROR: running kernels compiled for compute capability 0.0 "
        "(< 5.0) on device with compute capability 5.0 (>=5.0), this would give incorrect results!",
        "gate:kokkos-compiled-for-newer",
        ("sm_50 is not among its targets",),
        (),
        ("0.0",),
    ),
    # TensorRT's words when a plan built on an A100 (8.0) is deserialized on an A10 (8.6): an
    # engine serves the kind of GPU it was built on, so the fix is a rebuild on this one
    "tensorrt-engine-elsewhere": (
        "[E] Error[6]: The engine plan file is generated on an incompatible device, expecting "
        "compute 8.6 got compute 8.0, please rebuild.\n",
        "tensorrt-engine-other-device",
        ("built on a GPU of another compute capability",),
        ("rebuild the engine on this GPU",),
        (),
    ),
}


@pytest.mark.parametrize("case", WORDINGS)
def test_a_wording_is_decided_by_its_rule(case: str) -> None:
    log, signature, cause, fixes, neither = WORDINGS[case]
    diagnosis = _explained(log)
    assert diagnosis.signature == signature
    said = diagnosis.root_cause + " | " + _fixes(diagnosis)
    assert all(part in diagnosis.root_cause for part in cause)
    assert all(part in _fixes(diagnosis) for part in fixes)
    assert not any(part in said for part in neither)
