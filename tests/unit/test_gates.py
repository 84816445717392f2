"""Capability gates in frameworks' own words (kb/gates.json), each met by its own message.

Each gate's message is printed here as its framework prints it (the placeholders of its released
source filled with capabilities chosen for the case), then explained from the log alone. The
expectations come from the rule each case falls under, never from archgap's output:

- a GPU below a framework's minimum runs no build of it (NVIDIA's numbering: SASS for sm_XY runs
  on X.Z with Z >= Y only, and a framework that needs 8.0 has no code for 7.5): the fix is another
  GPU at or above the minimum, another backend, or a release that still served the GPU;
- a GPU below a compiler's lowest target needs an older toolkit: CUDA 13.0 removed sm_50 to sm_72
  (its release notes), so the last toolkit that builds sm_50 or sm_61 is CUDA 12.9;
- a message whose own facts say the GPU meets the minimum is not this gap.
"""

from __future__ import annotations

import pytest

from archgap.analysis.explain.diagnosis import Diagnosis, explain
from archgap.analysis.explain.logparse import parse_log
from archgap.kb.gates import Gate, Known, load_gates, load_known, parse_gates
from archgap.kb.signatures import load_signatures

GATES = {g.id: g for g in load_gates()}


def _printed(
    gate: Gate | Known, cc: str, need: str = "", listed: str = "", found: str = "", built: str = ""
) -> str:
    """The gate's message as its framework prints it for a GPU of ``cc``."""
    values = {
        "cc": cc,
        "cc_int": cc.replace(".", ""),
        "cc_major": cc.split(".")[0],
        "cc_minor": cc.split(".")[1],
        "need": need,
        "need_int": need.replace(".", ""),
        "need_major": need.split(".")[0],
        "need_minor": need.partition(".")[2],
        "list": listed,
        "found": found,
        "built": built,
    }
    return gate.message.format(**values)


def _explained(text: str) -> Diagnosis:
    return explain(parse_log(text), load_signatures())


def _fixes(d: Diagnosis) -> str:
    return " | ".join(f.text for f in d.fixes)


def test_every_gate_names_its_release_and_source() -> None:
    for gate in load_gates():
        assert gate.source.startswith("https://"), gate.id
        if gate.framework != "any" and gate.line:
            assert gate.release and gate.file, gate.id
    with pytest.raises(ValueError):
        parse_gates({"gates": [{**_entry(), "rule": "guess"}]})


@pytest.mark.parametrize(
    ("gate_id", "cc", "need"),
    [
        ("cudf-volta-required", "6.0", "7.0"),  # a P100 under RAPIDS >= 24.02
        ("any-below-minimum", "7.5", "8.0"),  # koharu on a T4
        ("any-minimum-current", "7.5", "8.0"),  # vLLM's awq_marlin on a T4
        ("any-required-device", "3.0", "3.5"),  # XLA on a GTX 680
    ],
)
def test_a_gpu_below_the_minimum_runs_no_build(gate_id: str, cc: str, need: str) -> None:
    gate = GATES[gate_id]
    diagnosis = _explained(_printed(gate, cc, need))
    assert diagnosis.signature == gate.signature_id
    assert f">= {need}" in diagnosis.root_cause and f"{cc})" in diagnosis.root_cause
    assert "older" in diagnosis.root_cause
    fixes = _fixes(diagnosis)
    assert f"compute capability {need} or newer" in fixes
    assert "TORCH_CUDA_ARCH_LIST" not in fixes and "rebuild" not in fixes  # no build adds it


def test_the_last_release_that_served_the_gpu_is_offered_only_when_it_did() -> None:
    gate = GATES["cudf-volta-required"]
    assert gate.older is not None and gate.older.serves_from == "6.0"  # RAPIDS 23.12: Pascal
    pascal = _fixes(_explained(_printed(gate, "6.1", "7.0")))
    maxwell = _fixes(_explained(_printed(gate, "5.2", "7.0")))
    assert "23.12" in pascal
    assert "23.12" not in maxwell  # RAPIDS never served 5.x


@pytest.mark.parametrize("gate_id", ["any-minimum-current", "any-below-minimum"])
def test_a_gpu_that_meets_the_minimum_is_not_this_gap(gate_id: str) -> None:
    # the message's own numbers say 8.6 >= 8.0: whatever failed, it was not this minimum
    diagnosis = _explained(_printed(GATES[gate_id], "8.6", "8.0"))
    assert ">= 8.0" not in diagnosis.root_cause


def test_a_compiler_below_the_gpu_needs_the_last_toolkit_that_built_it() -> None:
    gate = GATES["numba-cuda-nvrtc-below-minimum"]
    listed = "7.5, 8.0, 8.6, 8.7, 8.9, 9.0, 10.0, 11.0, 12.0"  # NVRTC 13.0: sm_75 and up
    diagnosis = _explained(_printed(gate, "6.1", listed=listed))
    assert diagnosis.signature == gate.signature_id
    assert "lowest target is 7.5" in diagnosis.root_cause and "6.1" in diagnosis.root_cause
    assert "CUDA 12.9 or older" in _fixes(diagnosis)  # CUDA 13.0 removed sm_50..sm_72


def test_nvvm_requires_names_its_minimum() -> None:
    gate = GATES["numba-cuda-cc-requires"]
    diagnosis = _explained(_printed(gate, "5.0", "7.5"))
    assert diagnosis.signature == gate.signature_id
    assert "lowest target is 7.5" in diagnosis.root_cause
    assert "CUDA 12.9 or older" in _fixes(diagnosis)


def test_a_build_without_code_at_or_below_the_gpu() -> None:
    gate = GATES["cudf-missing-ptx"]
    diagnosis = _explained(_printed(gate, "5.2"))
    assert diagnosis.signature == gate.signature_id
    assert "no code for compute capability 5.2 or below" in diagnosis.root_cause
    assert "compute capability 6.0 or newer" in _fixes(diagnosis)


def test_a_minimum_without_the_gpu_asks_for_it() -> None:
    # cuDF's first line alone: 7.0 needed, the GPU not stated (the lines after it are cut)
    text = GATES["cudf-volta-required"].message.split("\n")[0].format(need="7.0")
    diagnosis = _explained(text)
    assert diagnosis.cause_status == "conditional"
    assert any("compute capability" in d for d in diagnosis.decide)


def _entry() -> dict[str, object]:
    return {
        "id": "x",
        "framework": "f",
        "release": "",
        "file": "",
        "line": 0,
        "message": "m",
        "keywords": ["m"],
        "pattern": "m",
        "rule": "minimum",
        "source": "https://example.invalid",
    }


# ---------------------------------------------------------------- the mined messages

# Each framework's minimum, as its source states it (the message's number, or the literal of
# the check beside it), and a GPU below it: NVIDIA's numbering puts 7.5 (T4) below 8.0, 8.6
# below 8.9, 8.9 below 9.0, 9.0 below 10.0, 6.1 (GTX 1080) below 7.0/7.5, 3.0 below 3.5.
# The GPU is stated on a line of its own the way Paddle prints it, so the gates whose
# message does not carry it are decided from the log too.
MINIMUM = {
    "vllm-bfloat16-ampere": ("7.5", "8.0"),
    "vllm-torchao-fp8": ("8.6", "8.9"),
    "vllm-fa2-min": ("7.5", "8.0"),
    "vllm-fp8-marlin-min": ("7.0", "7.5"),
    "sglang-nvfp4-jit": ("9.0", "10.0"),
    "transformers-flash-attn-major": ("7.5", "8.0"),
    "transformers-sonicmoe-hopper": ("8.0", "9.0"),
    "transformers-fp8-min": ("8.6", "9.0"),
    "transformers-mxfp4-min": ("7.0", "7.5"),
    "transformers-nvfp4-blackwell": ("9.0", "10.0"),
    "transformers-tf32-ampere": ("7.5", "8.0"),
    "accelerate-fp8-min": ("8.6", "8.9"),
    "diffusers-attention-min": ("7.5", "8.0"),
    "diffusers-nunchaku-nvfp4": ("8.9", "10.0"),
    "diffusers-nunchaku-int4": ("7.0", "7.5"),
    "te-required-for-execution": ("8.6", "8.9"),
    "te-fp8-block-scaling": ("8.9", "9.0"),
    "te-bf16-ampere": ("7.5", "8.0"),
    "te-jax-grouped-gemm-sm90": ("8.0", "9.0"),
    "xformers-splitk-sm80": ("7.5", "8.0"),
    "triton-clc-sm100": ("9.0", "10.0"),
    "triton-num-ctas-sm90": ("8.0", "9.0"),
    "jax-cudnn-packed-hopper": ("8.0", "9.0"),
    "jax-mosaic-hopper-plus": ("8.0", "9.0"),
    "numba-cuda-min-cc": ("3.0", "3.5"),
    "unsloth-studio-engine-min": ("7.5", "8.0"),
    "deepspeed-evoformer-volta": ("6.1", "7.0"),
    "deepspeed-blocked-attention-ampere": ("7.5", "8.0"),
    "tgi-flash-attention-capability": ("6.1", "7.5"),
    "tgi-marlin-ampere": ("7.5", "8.0"),
    "gptqmodel-pascal-min": ("5.2", "6.0"),
    "gptqmodel-marlin-min": ("7.0", "7.5"),
    "gptqmodel-marlin-only-supports": ("7.5", "8.0"),
    "gptqmodel-marlin-turing": ("7.0", "7.5"),
    "gptqmodel-awq-bf16-ampere": ("7.5", "8.0"),
    "gptqmodel-machete-min": ("8.9", "9.0"),
    "ort-decoder-masked-mha-min": ("5.2", "5.3"),
    "llvm-nvptx-requires-sm": ("8.0", "9.0"),
}


def _with_gpu(text: str, cc: str) -> str:
    return f"W0101 device: 0, GPU Compute Capability: {cc}\n{text}"


@pytest.mark.parametrize(("gate_id", "cc", "need"), [(k, *v) for k, v in MINIMUM.items()])
def test_each_framework_minimum_decides_a_gpu_below_it(gate_id: str, cc: str, need: str) -> None:
    gate = GATES[gate_id]
    assert gate.rule == "minimum"
    diagnosis = _explained(_with_gpu(_printed(gate, cc, need), cc))
    assert diagnosis.signature == gate.signature_id
    assert f">= {need}" in diagnosis.root_cause and f"{cc})" in diagnosis.root_cause
    assert f"compute capability {need} or newer" in _fixes(diagnosis)
    assert "rebuild" not in _fixes(diagnosis)  # no build of it serves a GPU below its minimum


@pytest.mark.parametrize(("gate_id", "need"), [(k, v[1]) for k, v in MINIMUM.items()])
def test_each_framework_minimum_met_is_not_this_gap(gate_id: str, need: str) -> None:
    # a GPU at the minimum itself (the gate fired for another reason, or the log is mixed)
    diagnosis = _explained(_with_gpu(_printed(GATES[gate_id], need, need), need))
    assert f">= {need};" not in diagnosis.root_cause


def test_a_setting_the_framework_names_comes_first() -> None:
    # vLLM's own words: bfloat16 needs 8.0, "You can use float16 instead ... --dtype=half"
    diagnosis = _explained(_printed(GATES["vllm-bfloat16-ampere"], "7.5", "8.0"))
    assert diagnosis.fixes[0].text.startswith("use float16 instead: --dtype=half")
    assert "no build or setting" not in diagnosis.root_cause  # a setting does avoid it


# Kernels for named architectures only: sm_90a's wgmma runs on 9.0 alone, sm_100's tcgen05 on
# the 10.x family; a GPU outside the families, older or newer, cannot run them.
FAMILY = {
    "vllm-fa3-hopper": ("8.0", "9.0", "older than each"),
    "vllm-fa3-hopper#new": ("10.0", "9.0", "newer than each"),
    "vllm-fa4-families": ("12.0", "10.0", "newer than each"),
    "vllm-quant-exact-capability": ("10.0", "9.0", "newer than each"),
    "vllm-machete-hopper": ("8.9", "9.0", "older than each"),
    "flash-attn-cute-families": ("7.5", "8.6", "older than each"),
    "sglang-cutlass-fp8-moe": ("11.0", "12.0", "none of them"),
    "sglang-cutlass-fp8-moe#old": ("8.9", "9.0", "older than each"),
    "sglang-mxfp8-blackwell": ("11.0", "10.3", "none of them"),
    "sglang-nunchaku-families": ("9.0", "8.6", "none of them"),
    "transformers-deepgemm-families": ("12.0", "9.0", "newer than each"),
    "liger-cute-hopper": ("10.0", "9.0", "newer than each"),
    "gptqmodel-machete-hopper-only": ("10.0", "9.0", "newer than each"),
    "gptqmodel-swordfish-blackwell": ("9.0", "10.3", "older than each"),
    # TGI 1.x flash_attn.py:29: V2 when is_sm8x or is_sm90 only
    "tgi-flash-attention-v2-families": ("7.5", "8.6", "older than each"),
    "tgi-flash-attention-v2-families#new": ("12.0", "9.0", "newer than each"),
}
LISTED = {"gptqmodel-swordfish-blackwell": "sm100, sm103, sm120"}  # the kernel's own list


@pytest.mark.parametrize(
    ("case", "outside", "inside", "side"), [(k, *v) for k, v in FAMILY.items()]
)
def test_kernels_of_named_architectures_run_on_those_alone(
    case: str, outside: str, inside: str, side: str
) -> None:
    gate = GATES[case.split("#")[0]]
    assert gate.rule == "family"
    need = inside if "{need" in gate.message else ""
    listed = LISTED.get(gate.id, "")
    diagnosis = _explained(_with_gpu(_printed(gate, outside, need, listed), outside))
    assert diagnosis.signature == gate.signature_id
    assert "runs only on compute capability" in diagnosis.root_cause
    assert f"{outside}) is {side}" in diagnosis.root_cause
    assert "another path" in _fixes(diagnosis)
    met = _explained(_with_gpu(_printed(gate, inside, need, listed), inside))
    assert "runs only on" not in met.root_cause


@pytest.mark.parametrize(
    ("gate_id", "listed", "cc", "expect"),
    [
        # ggml's list is __CUDA_ARCH__ (520 is 5.2): a GTX 1080 (6.1) has no sm_61 code in it;
        # nvcc targets sm_61 from CUDA 8.0 to 12.9 (13.0 removed sm_50..sm_72)
        ("ggml-no-device-code", "520", "6.1", "sm_61 is missing|CUDA 8.0 to 12.9"),
        # Paddle's list is capabilities: an RTX 5090 (12.0) against a cu118-era list; nvcc
        # targets sm_120 from CUDA 12.8 on
        ("paddle-arch-not-compatible", "60 61 70 75 80 86", "12.0", "sm_120 is missing|12.8"),
        # a Maxwell (5.2) against Paddle 3's list from 6.1: older than every target
        ("paddle-arch-not-compatible", "61 70 75 80 86 89 90", "5.2", "older than every"),
        # Thrust names only the GPU: a T4 (7.5) the binary has no code for; nvcc targets sm_75
        # from CUDA 10.0 on
        ("thrust-not-compiled-for-sm", "", "7.5", "sm_75 is not among|CUDA 10.0 or newer"),
        # Kokkos built for an A100 (8.0) on a V100 (7.0): SASS of 8.0 does not run on 7.0;
        # nvcc targets sm_70 from CUDA 9.0 to 12.9
        ("kokkos-compiled-for-newer", "8.0", "7.0", "older than every|CUDA 9.0 to 12.9"),
        # its test kernel ran nowhere: the GPU is no target of the build
        ("kokkos-no-kernel-for-device", "", "7.0", "sm_70 is not among|CUDA 9.0 to 12.9"),
    ],
)
def test_a_build_list_against_the_gpu(gate_id: str, listed: str, cc: str, expect: str) -> None:
    gate = GATES[gate_id]
    diagnosis = _explained(_with_gpu(_printed(gate, cc, listed=listed), cc))
    assert diagnosis.signature == gate.signature_id
    for part in expect.split("|"):
        assert part in diagnosis.root_cause + " " + _fixes(diagnosis)


def test_a_build_list_that_serves_the_gpu_is_not_this_gap() -> None:
    # SASS for sm_86 runs on 8.9 (same major, later minor): the list serves an RTX 4090
    gate = GATES["paddle-arch-not-compatible"]
    diagnosis = _explained(_with_gpu(_printed(gate, "8.9", listed="80 86"), "8.9"))
    assert "was built for" not in diagnosis.root_cause


@pytest.mark.parametrize(
    ("gate_id", "found", "built", "driver"),
    [
        # the driver API's 11000 is CUDA 11.0; CUDA 12.8 needs a Linux driver >= 570.26
        ("torch-driver-too-old", "11000", "12.8", "570.26"),
        # CUDA 12.6 needs >= 560.28.03
        ("paddle-driver-cuda", "11.8", "12.6", "560.28.03"),
    ],
)
def test_a_driver_older_than_the_build(gate_id: str, found: str, built: str, driver: str) -> None:
    gate = GATES[gate_id]
    text = f"CUDA used to build PyTorch: {built}\n" + _printed(
        gate, "0.0", found=found, built=built
    )
    diagnosis = _explained(text)
    assert diagnosis.signature == gate.signature_id
    assert f"built with CUDA {built}" in diagnosis.root_cause
    assert f"{driver} or newer" in _fixes(diagnosis)
    newer = _printed(gate, "0.0", found="12.8" if "." in found else "12080", built="12.6")
    assert "driver is older" not in _explained(newer).root_cause


@pytest.mark.parametrize("known", load_known(), ids=[f"{k.file}:{k.line}" for k in load_known()])
def test_each_mined_message_is_recognised_by_its_signature(known: Known) -> None:
    diagnosis = _explained(_printed(known, "7.5", "8.0"))
    assert diagnosis.signature == known.signature


def test_an_extension_built_only_above_the_gpu() -> None:
    # tiny-cuda-nn loads _<cc>_C for the GPU's capability or one below it: none for a GTX 1080
    gate = GATES["tcnn-no-compatible-extension"]
    diagnosis = _explained(_printed(gate, "6.1"))
    assert diagnosis.signature == gate.signature_id
    assert "no code for compute capability 6.1 or below" in diagnosis.root_cause
