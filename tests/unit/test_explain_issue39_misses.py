"""The remaining known misses of explain (issue 39), each from its released source or NVIDIA's
rules. Every expectation is stated from first principles, never from archgap's output:

- NVIDIA's binary compatibility: SASS for sm_XY runs on X.Z with Z >= Y only (CUDA C++
  Programming Guide), so a build for 7.5 8.0 8.6 8.9 has nothing for a 12.0 GPU, sm_100 nothing
  for a 12.1, and sm_86 runs on an 8.9; nvcc targets sm_120 from CUDA 12.8 (its release notes);
- OpenCV's modules/dnn/CMakeLists.txt (git 0111db51, line 136) loops over CUDA_ARCH_BIN and
  stops the configure step when an entry is below the minimum its message states: the build's
  own list, checked before any GPU is asked;
- nvcc's -arch / -gencode name the targets of a build (nvcc's option reference), not the GPU it
  runs on; CUDA 11.0 removed sm_30 (its release notes), so nvcc 11.8 rejects it;
- cuDNN's cudnnStatus_t documents CUDNN_STATUS_ARCH_MISMATCH only as the GPU's architecture not
  matching the call, which leaves two causes (no kernels for the GPU in that release, or a call
  that needs a newer GPU): the answer must name both and what decides;
- bitsandbytes 0.50.2's wheel: libbitsandbytes_cuda118..126 carry sm_60..sm_90, _cuda128 sm_70..
  sm_120, _cuda130/_cuda132 sm_75..sm_120 (their device code, read below from the real wheel);
  BNB_CHECK_RETURN prints 'Error %s at line %d in file %s' with cudaGetErrorString, whose text for
  cudaErrorNoKernelImageForDevice is 'no kernel image is available for execution on the device'
  (CUDA runtime API, cudaError); cextension.py loads the library BNB_CUDA_VERSION names;
- bellperson's README at v0.27.0: "NVIDIA (Turing or newer)" (7.5), BELLMAN_NO_GPU for the CPU.
"""

from __future__ import annotations

import pytest

from archgap.analysis.explain.diagnosis import Diagnosis, explain
from archgap.analysis.explain.logparse import parse_log
from archgap.analysis.explain.rules.arch_token import build_targets
from archgap.kb.gates import load_gates
from archgap.kb.signatures import load_signatures
from archgap.orchestrate.kernels import kernel_files
from tests.helpers import need_data

GATES = {g.id: g for g in load_gates()}


def _explained(text: str) -> Diagnosis:
    return explain(parse_log(text), load_signatures())


def _fixes(d: Diagnosis) -> str:
    return " | ".join(f.text for f in d.fixes)


# ---------------------------------------------------------------- a build's list and the GPU


@pytest.mark.parametrize(
    ("listed", "cc", "missing"),
    [
        ("75 80 86 89", "120", "sm_120"),  # a cu126-era list on an RTX 5090
        ("100", "121", "sm_121"),  # an sm_100-only aarch64 build on a GB10
    ],
)
def test_a_build_list_and_the_running_gpu_in_one_line(listed: str, cc: str, missing: str) -> None:
    text = f"Mismatched GPU Architecture: compiled for {listed} ,but your current GPU is {cc}"
    diagnosis = _explained(text)
    assert diagnosis.signature == GATES["any-compiled-for-current-gpu"].signature_id
    assert f"{missing} is missing" in diagnosis.root_cause
    assert "CUDA 12.8 or newer" in _fixes(diagnosis) or "CUDA 12.9 or newer" in _fixes(diagnosis)


def test_a_list_that_serves_the_gpu_is_not_this_gap() -> None:
    # sm_86 SASS runs on an 8.9 (same major, later minor)
    text = "The installed package was compiled for 80 86, but your current GPU is 89"
    assert "is missing" not in _explained(text).root_cause


def test_paddle_names_itself_in_the_message() -> None:
    text = (
        "Mismatched GPU Architecture: The installed PaddlePaddle package was compiled for "
        "75 80 86 89 ,but your current GPU is 120"
    )
    assert _explained(text).root_cause.startswith("paddlepaddle was built for")


# ---------------------------------------------------------------- OpenCV's arch-list gate


def _opencv(need: str, gpu: str = "") -> str:
    gate = GATES["opencv-dnn-cuda-arch-bin"]
    return gpu + gate.message.format(need=need)


def test_opencv_refuses_its_own_arch_list_not_the_gpu() -> None:
    diagnosis = _explained(_opencv("5.3"))
    assert diagnosis.signature == GATES["opencv-dnn-cuda-arch-bin"].signature_id
    assert "CUDA_ARCH_BIN" in diagnosis.root_cause and "not the GPU" in diagnosis.root_cause
    assert "the GPU" not in diagnosis.root_cause.split("not the GPU")[0]  # no GPU claimed
    assert _fixes(diagnosis).startswith("remove the architectures below 5.3 from CUDA_ARCH_BIN")
    assert "OPENCV_DNN_CUDA=OFF" in _fixes(diagnosis)  # the message's own other way


def test_opencv_with_the_gpu_named_keeps_its_capability() -> None:
    # a GTX 1080 (6.1) is above 5.3: the list it needs is its own capability
    diagnosis = _explained(_opencv("5.3", "GPU 0: NVIDIA GeForce GTX 1080 (UUID: GPU-1)\n"))
    assert "-D CUDA_ARCH_BIN=6.1" in _fixes(diagnosis)


def test_opencv_on_a_gpu_below_the_minimum_turns_the_backend_off() -> None:
    # a Tesla K80 (3.7) is below 5.3: no list makes the DNN CUDA backend build for it
    diagnosis = _explained(_opencv("5.3", "GPU 0: Tesla K80 (UUID: GPU-1)\n"))
    assert _fixes(diagnosis).startswith("or configure without the DNN module's CUDA backend")


# ---------------------------------------------------------------- nvcc's targets are the build's

_NVCC_SM30 = (
    "Cuda compilation tools, release 11.8, V11.8.89\n"
    "/usr/local/cuda/bin/nvcc -arch=sm_30 -O3 -c src/kernel.cu -o build/kernel.o\n"
    "nvcc fatal   : Value 'sm_30' is not defined for option 'gpu-architecture'\n"
)


def test_a_build_target_is_not_the_gpu() -> None:
    diagnosis = _explained(_NVCC_SM30)
    assert "CUDA 11.0 dropped sm_30" in diagnosis.root_cause
    assert "GPU: 3.0" not in diagnosis.root_cause and "3.0)" not in diagnosis.root_cause
    assert _fixes(diagnosis).startswith("remove sm_30 from the build's arch list")


def test_a_gpu_the_log_states_is_still_the_gpu() -> None:
    # the log names a GTX 1080 (6.1): the fix builds for it, sm_30 is not needed
    diagnosis = _explained("GPU 0: NVIDIA GeForce GTX 1080 (UUID: GPU-1)\n" + _NVCC_SM30)
    assert "6.1)" in diagnosis.root_cause
    assert "build sm_61" in _fixes(diagnosis)


def test_a_jit_that_builds_for_its_gpu_keeps_the_target_as_the_gpu() -> None:
    # FlashInfer's JIT builds for the GPU it runs on: sm_121a there is the GPU (12.1)
    text = (
        "[1/3] /usr/local/cuda/bin/nvcc -gencode=arch=compute_121a,code=sm_121a -c "
        "/root/.cache/flashinfer/0.2.8/121a/generated/batch_decode.cu -o batch_decode.cuda.o\n"
        "nvcc fatal   : Value 'sm_121a' is not defined for option 'gpu-architecture'\n"
    )
    assert "12.1)" in _explained(text).root_cause


@pytest.mark.parametrize(
    ("line", "targets"),
    [
        ("nvcc -arch=sm_30 -c a.cu", {"30"}),
        ("nvcc -arch sm_52 -c a.cu", {"52"}),
        ("nvcc --gpu-architecture=compute_61 -c a.cu", {"61"}),
        ("nvcc -gencode arch=compute_70,code=sm_70 -c a.cu", {"70"}),
        ("nvcc --generate-code=arch=compute_90a,code=[sm_90a] a.cu", {"90"}),
        # not flags: an error's option name, ptxas's own --gpu-name (Triton's, for its GPU)
        ("nvcc fatal : Value 'sm_30' is not defined for option 'gpu-architecture'", set()),
        ("/root/.cache/flashinfer/x.cu -gencode=arch=compute_120a,code=sm_120a", set()),
    ],
)
def test_build_targets_are_nvccs_flags(line: str, targets: set[str]) -> None:
    assert build_targets([line]) == targets


# ---------------------------------------------------------------- cuDNN's ARCH_MISMATCH


@pytest.mark.parametrize(
    "text",
    [
        "RuntimeError: cuDNN error: CUDNN_STATUS_ARCH_MISMATCH",
        "F0817 cudnn_conv_layer.cpp:32] Check failed: status == CUDNN_STATUS_SUCCESS (6 vs. 0)  "
        "CUDNN_STATUS_ARCH_MISMATCH",
    ],
)
def test_cudnn_arch_mismatch_is_conditional_between_its_two_causes(text: str) -> None:
    diagnosis = _explained(text)
    assert diagnosis.status == "diagnosed"
    assert diagnosis.signature == "cudnn-status-arch-mismatch"
    assert diagnosis.cause_status == "conditional"  # never one invented cause
    cases = " ".join(c.cause for c in diagnosis.cases)
    assert "no kernels for the GPU" in cases and "needs a feature of a newer" in cases
    assert any("support matrix" in d for d in diagnosis.decide)


# ---------------------------------------------------------------- bitsandbytes' own message

_BNB = (
    "GPU 0: {gpu} (UUID: GPU-1)\n"
    "Traceback (most recent call last):\n"
    '  File "/opt/conda/lib/python3.11/site-packages/bitsandbytes/functional.py", line 1234, '
    "in int8_vector_quant\n"
    "    lib.cint8_vector_quant(...)\n"
    # BNB_CHECK_RETURN's "Error %s at line %d in file %s" with cudaGetErrorString(209)
    "Error no kernel image is available for execution on the device at line 112 in file "
    "/src/csrc/ops.cu\n"
)


def test_bitsandbytes_gate_wins_when_its_frames_name_it() -> None:
    # a Tesla P100 (6.0): only the cuda118..cuda126 libraries carry sm_60
    diagnosis = _explained(_BNB.format(gpu="Tesla P100-PCIE-16GB"))
    assert diagnosis.signature == GATES["bitsandbytes-ops-cuda-error"].signature_id
    assert "BNB_CUDA_VERSION=126" in _fixes(diagnosis)
    assert "BNB_CUDA_VERSION=128" not in _fixes(diagnosis)


def test_bitsandbytes_on_blackwell_loads_a_library_with_sm_120() -> None:
    diagnosis = _explained(_BNB.format(gpu="NVIDIA GeForce RTX 5090"))
    fixes = _fixes(diagnosis)
    assert "BNB_CUDA_VERSION=128" in fixes and "BNB_CUDA_VERSION=130" in fixes
    assert "BNB_CUDA_VERSION=126" not in fixes


def test_bitsandbytes_below_every_library_has_no_switch() -> None:
    # a GTX 980 (5.2): no library of 0.50.2 has sm_50..sm_52
    diagnosis = _explained(_BNB.format(gpu="NVIDIA GeForce GTX 980"))
    assert diagnosis.root_cause.startswith("no library of bitsandbytes")
    assert "BNB_CUDA_VERSION" not in _fixes(diagnosis)


def test_bitsandbytes_on_a_gpu_every_library_serves_is_not_decided() -> None:
    # an RTX 3090 (8.6) runs every library of 0.50.2: the release, not the GPU, is in question
    diagnosis = _explained(_BNB.format(gpu="NVIDIA GeForce RTX 3090"))
    assert diagnosis.cause_status == "conditional"
    assert "BNB_CUDA_VERSION" not in _fixes(diagnosis)


def test_without_bitsandbytes_named_the_generic_no_kernel_signature_stays() -> None:
    text = (
        "Error no kernel image is available for execution on the device at line 112 in file "
        "/src/csrc/ops.cu\n"
    )
    assert _explained(text).signature == "cuda-no-kernel-image"


def test_the_bitsandbytes_table_is_what_its_wheel_carries() -> None:
    (venv,) = need_data("venv-bitsandbytes-0.50.2")
    package = venv / "lib" / "python3.11" / "site-packages" / "bitsandbytes"
    carried: dict[str, str] = {}
    for facts in kernel_files([str(p) for p in sorted(package.glob("libbitsandbytes_cuda*.so"))]):
        name = facts.path.rsplit("/", 1)[-1].removesuffix(".so").removeprefix("libbitsandbytes_")
        carried[name] = " ".join(str(e.arch) for e in sorted(facts.entries, key=lambda e: e.arch))
    table = {}
    for build in GATES["bitsandbytes-ops-cuda-error"].builds:
        for name in build.libraries.replace(" and ", ", ").split(", "):
            table[name.removeprefix("libbitsandbytes_").removeprefix("_")] = build.archs
    assert table == carried


# ---------------------------------------------------------------- bellperson: Turing or newer

_BELLPERSON = (
    "GPU 0: {gpu} (UUID: GPU-1)\n"
    "2024-01-01T00:00:00.000 INFO bellperson::groth16::prover > proving\n"
    "thread 'main' panicked at 'called `Result::unwrap()` on an `Err` value: "
    "Cuda(CUDA_ERROR_NO_BINARY_FOR_GPU)'\n"
)


def test_bellperson_on_a_gpu_older_than_turing() -> None:
    diagnosis = _explained(_BELLPERSON.format(gpu="Tesla V100-SXM2-16GB"))  # 7.0 < 7.5
    assert "bellperson supports compute capability 7.5 and newer only" in diagnosis.root_cause
    assert "BELLMAN_NO_GPU=1" in _fixes(diagnosis)


def test_bellperson_on_turing_is_a_build_without_its_arch() -> None:
    diagnosis = _explained(_BELLPERSON.format(gpu="Tesla T4"))  # 7.5: supported
    assert "supports compute capability 7.5" not in diagnosis.root_cause
    assert "BELLMAN_CUDA_NVCC_ARGS" in _fixes(diagnosis)
