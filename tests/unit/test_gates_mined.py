"""The mined gate messages of issue 39 (kb/gates.json), each printed from its released source.

Every gate of the table must be met by a case: the parametrized tests of test_gates.py, or the
tables here. Each case prints the gate's message as its release prints it (the placeholders of
its source filled with values chosen for the case) and explains it from the log alone. The
expectations come from the rule the case falls under and from the entry's source, never from
archgap's output:

- a minimum: a GPU below it runs no build of it (NVIDIA's numbering: 7.5 is below 8.0, 8.6 below
  8.9, 8.9 below 9.0, 6.1 below 7.0, 3.0 below 3.5);
- a build with no code at or below the GPU: older than every target the build was made for;
- a family: the kernels run on the majors the check accepts alone (quack-kernels 0.6.5 asserts
  the major is 10, 11 or 12);
- a compiler's lowest target: CUDA 13.0 removed sm_50 to sm_72 (its release notes), so the last
  toolkit that builds sm_61 is 12.9;
- a build script's own toolkit check (nvcc -V): a toolkit question whatever the GPU;
- PTX ISA per target: a target exists from the PTX ISA that introduced it (NVIDIA's PTX ISA
  release notes: sm_100 and sm_120 from PTX ISA 8.7, shipped with CUDA 12.8).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from archgap.kb.gates import Gate, Known, load_gates, load_known, project_of
from tests.unit.test_gates import FAMILY, GATES, MINIMUM, _explained, _fixes, _printed, _with_gpu

# (the GPU below the minimum, the minimum) for each framework minimum mined in this round
MINED_MINIMUM = {
    "xla-triton-ampere": ("7.5", "8.0"),  # XLA's Triton GEMMs on a T4
    "numba-detect-not-supported": ("3.0", "3.5"),  # a GTX 680 under numba 0.61
    "torchao-float8-dynamic": ("8.6", "8.9"),  # an RTX 3090
    "torchao-int4-tinygemm": ("7.5", "8.0"),
    "ctranslate2-float16": ("6.1", "7.0"),  # a GTX 1080: no fp16 tensor cores
    "ctranslate2-bfloat16": ("7.5", "8.0"),
    "modelopt-bf16-wmma-ampere": ("7.5", "8.0"),
    "modelopt-nvfp4-attention": ("8.6", "8.9"),
    "fla-cp-ampere": ("7.5", "8.0"),
    "quack-allgather-sm90": ("8.9", "9.0"),  # an RTX 4090 below Hopper
    "deepspeed-inference-pascal": ("5.2", "6.0"),  # a GTX 980 (Maxwell)
    "deepspeed-fp-quantizer-ampere": ("7.5", "8.0"),
    "nccl-gin-volta": ("6.1", "7.0"),  # GIN on a GTX 1080
    "torch-inductor-triton-minimum": ("6.1", "7.0"),  # torch.compile on a GTX 1080 Ti
    "any-requires-capability": ("3.7", "5.0"),  # "the kernel requires 5.0 capability" on a K80
    "any-capability-or-greater": ("3.5", "5.0"),  # neon on a Tesla K20
}
# a build script's own CUDA toolkit minimum: (the minimum, an nvcc release below it)
TOOLKIT_VERSION = {
    "apex-fmha-toolkit": ("11.0", "10.2"),  # apex 25.09 setup.py:703 checks < 11.0
    "flash-attn-setup-cuda": ("11.7", "11.6"),
    "mamba-ssm-setup-cuda": ("11.6", "11.4"),
    "causal-conv1d-setup-cuda": ("11.6", "11.4"),
}
# the other gates of this round, each met by its own test below
OWN_TESTS = {
    "tf-ignoring-visible-gpu",
    "quack-blockscaled-families",
    "warp-cuda13-sm75",
    "llvm-nvptx-ptx-version-for-target",
    "paddle-cc-not-supported",  # an older gate no case met until this test asked
    "any-requires-got",
    # issue 39's remaining misses: tests/unit/test_explain_issue39_misses.py
    "any-compiled-for-current-gpu",
    "opencv-dnn-cuda-arch-bin",
    "bitsandbytes-ops-cuda-error",
    # explain blind set 9's wordings: tests/unit/test_gates_blind_rounds.py
    "any-not-supported-on-cuda",
    "ngc-container-not-yet-supported",
    "any-not-yet-supported",
    "hoomd-below-build-arch",
}


def _nvcc(release: str) -> str:
    """nvcc -V's last lines, as a build log shows them."""
    major, minor = release.split(".")
    return f"Cuda compilation tools, release {release}, V{major}.{minor}.89\n"


def test_every_gate_is_met_by_a_case() -> None:
    # a gate added to gates.json without a case fails here, so coverage is by construction
    named = Path(__file__).with_name("test_gates.py").read_text()
    covered = (
        set(MINIMUM)
        | {k.split("#")[0] for k in FAMILY}
        | set(MINED_MINIMUM)
        | set(TOOLKIT_VERSION)
        | OWN_TESTS
        | {g.id for g in load_gates() if f'"{g.id}"' in named}
    )
    missing = sorted(g.id for g in load_gates() if g.id not in covered)
    assert missing == []


@pytest.mark.parametrize(("gate_id", "cc", "need"), [(k, *v) for k, v in MINED_MINIMUM.items()])
def test_a_mined_minimum_decides_a_gpu_below_it(gate_id: str, cc: str, need: str) -> None:
    gate = GATES[gate_id]
    assert gate.rule == "minimum"
    diagnosis = _explained(_with_gpu(_printed(gate, cc, need), cc))
    assert diagnosis.signature == gate.signature_id
    assert f">= {need}" in diagnosis.root_cause and f"{cc})" in diagnosis.root_cause
    assert f"compute capability {need} or newer" in _fixes(diagnosis)
    assert "rebuild" not in _fixes(diagnosis)
    met = _explained(_with_gpu(_printed(gate, need, need), need))
    assert f">= {need};" not in met.root_cause  # a GPU at the minimum is not this gap


@pytest.mark.parametrize(("gate_id", "need", "nvcc"), [(k, *v) for k, v in TOOLKIT_VERSION.items()])
def test_a_build_script_toolkit_minimum_is_the_toolkit_not_the_gpu(
    gate_id: str, need: str, nvcc: str
) -> None:
    gate = GATES[gate_id]
    assert gate.rule == "toolkit-version"
    diagnosis = _explained(_nvcc(nvcc) + _printed(gate, "8.0", need))
    assert diagnosis.signature == gate.signature_id
    assert f"CUDA toolkit >= {need}" in diagnosis.root_cause
    assert f"CUDA {nvcc}" in diagnosis.root_cause  # the log's own nvcc
    fixes = _fixes(diagnosis)
    assert f"install CUDA {need} or newer" in fixes and "CUDA_HOME" in fixes
    assert "compute capability" not in fixes  # no other GPU helps a build that never started


def test_apex_fmha_words_name_gpus_but_its_check_is_the_toolkit() -> None:
    # apex 25.09 setup.py:703-704: `if bare_metal_version < Version("11.0"): raise
    # RuntimeError("--fmha only supported on sm_80 and sm_90 GPUs")`: on an A100 (8.0), a GPU
    # the words accept, the error still means nvcc older than 11.0
    gate = GATES["apex-fmha-toolkit"]
    text = _with_gpu(_nvcc("10.2") + _printed(gate, "8.0"), "8.0")
    diagnosis = _explained(text)
    assert "toolkit >= 11.0" in diagnosis.root_cause and "whatever the GPU" in diagnosis.root_cause
    assert "install CUDA 11.0 or newer" in _fixes(diagnosis)


def test_a_newer_toolkit_is_bounded_by_the_gpu() -> None:
    # mamba-ssm on a GTX 1080 (6.1): CUDA >= 11.6 for the build, and CUDA 13.0 removed sm_61,
    # so the toolkit that builds both is 11.6 to 12.9
    gate = GATES["mamba-ssm-setup-cuda"]
    text = _with_gpu(_nvcc("11.4") + _printed(gate, "6.1", "11.6"), "6.1")
    assert "no newer than CUDA 12.9" in _fixes(_explained(text))


def test_a_toolkit_at_the_minimum_is_not_this_gap() -> None:
    gate = GATES["flash-attn-setup-cuda"]
    diagnosis = _explained(_nvcc("12.4") + _printed(gate, "8.0", "11.7"))
    assert "toolkit >=" not in diagnosis.root_cause


def test_tensorflow_ignores_a_gpu_below_its_build() -> None:
    # TF's GetValidDeviceIds skips a GPU below the lowest capability the build carries: a K80
    # (3.7) under a build from 5.0 has no code at or below it; under one from 3.5 it is served
    gate = GATES["tf-ignoring-visible-gpu"]
    below = _explained(_printed(gate, "3.7", "5.0"))
    assert below.signature == gate.signature_id
    assert "no code for compute capability 3.7 or below" in below.root_cause
    assert "TensorFlow supports 5.0 and newer" in below.root_cause
    assert "compute capability 5.0 or newer" in _fixes(below)
    served = _explained(_printed(gate, "3.7", "3.5"))
    assert "no code for" not in served.root_cause


def test_quack_blockscaled_runs_on_the_majors_it_asserts() -> None:
    gate = GATES["quack-blockscaled-families"]
    assert gate.rule == "family" and gate.accepts == ("10.x", "11.x", "12.x")
    hopper = _explained(_with_gpu(_printed(gate, "9.0"), "9.0"))
    assert hopper.signature == gate.signature_id
    assert "9.0) is older than each of them" in hopper.root_cause
    assert "another path" in _fixes(hopper)
    for inside in ("10.0", "12.1"):  # B200, DGX Spark: majors 10 and 12
        met = _explained(_with_gpu(_printed(gate, inside), inside))
        assert "runs only on" not in met.root_cause


def test_warp_with_cuda_13_on_a_pascal_gpu() -> None:
    # warp-lang 1.19.0 context.py:6458; CUDA 13.0 removed sm_50..sm_72: the last toolkit for
    # sm_61 is CUDA 12.9, and Warp's own words say to use its CUDA 12 build
    gate = GATES["warp-cuda13-sm75"]
    diagnosis = _explained(_printed(gate, "6.1", "7.5"))
    assert diagnosis.signature == gate.signature_id
    assert "lowest target is 7.5" in diagnosis.root_cause and "6.1" in diagnosis.root_cause
    fixes = _fixes(diagnosis)
    assert "CUDA 12.9 or older" in fixes and "CUDA 12 build of Warp" in fixes
    assert "lowest target" not in _explained(_printed(gate, "8.6", "7.5")).root_cause


@pytest.mark.parametrize(
    ("text", "isa", "cuda"),
    [
        # LLVM's words with the minimum: sm_120 exists from PTX ISA 8.7 (CUDA 12.8)
        (
            "error: PTX version 8.6 does not support target 'sm_120a'. Minimum required PTX "
            "version is 8.7. Either remove the PTX version to use the default, or increase it "
            "to at least 8.7.",
            "8.7",
            "12.8",
        ),
        # older LLVM words name no minimum: sm_100 also came with PTX ISA 8.7 (CUDA 12.8)
        ("LLVM ERROR: PTX version 8.5 does not support target sm_100a", "8.7", "12.8"),
    ],
)
def test_ptx_asked_older_than_the_target(text: str, isa: str, cuda: str) -> None:
    gate = GATES["llvm-nvptx-ptx-version-for-target"]
    diagnosis = _explained(text)
    assert diagnosis.signature == gate.signature_id
    assert f"exists only from PTX ISA {isa} (CUDA {cuda}'s PTX ISA)" in diagnosis.root_cause
    assert "not from the GPU" in diagnosis.root_cause
    assert f"PTX ISA {isa} or newer" in _fixes(diagnosis)


def test_ptx_new_enough_for_the_target_is_not_this_gap() -> None:
    text = (
        "error: PTX version 8.8 does not support target 'sm_120a'. "
        "Minimum required PTX version is 8.7."
    )
    assert "exists only from PTX ISA" not in _explained(text).root_cause


def test_ctranslate2_names_its_own_way_around() -> None:
    # CT2 4.6.0 float16 needs fp16 tensor cores, major >= 7 (src/cuda/utils.cc:195), unless
    # CT2_CUDA_ALLOW_FP16 (types.cc:114): the compute type, not the whole library, is gated
    gate = GATES["ctranslate2-float16"]
    diagnosis = _explained(_with_gpu(_printed(gate, "6.1"), "6.1"))
    assert "needs compute capability >= 7.0" in diagnosis.root_cause
    assert "this path of it does not run there" in diagnosis.root_cause
    assert "CT2_CUDA_ALLOW_FP16=1" in _fixes(diagnosis)
    t4 = _explained(_with_gpu(_printed(gate, "7.5"), "7.5"))
    assert ">= 7.0;" not in t4.root_cause


def test_paddle_names_only_the_gpu_its_build_lacks() -> None:
    # Paddle's InitGpuProperties (gpu_resources.cc:107) prints the GPU alone: an RTX 5090 (120,
    # 12.0) its build does not list; nvcc targets sm_120 from CUDA 12.8 (its release notes)
    gate = GATES["paddle-cc-not-supported"]
    diagnosis = _explained(_printed(gate, "12.0"))
    assert diagnosis.signature == gate.signature_id
    assert "sm_120 is not among its targets" in diagnosis.root_cause
    assert "CUDA 12.8 or newer" in _fixes(diagnosis)


# ---------------------------------------------------------------- the table's projects


def test_a_project_is_the_top_level_project_that_prints_the_message() -> None:
    assert project_of({"framework": "vLLM (vllm_flash_attn)"}) == "vLLM"
    assert project_of({"framework": "NVRTC (numba-cuda)", "project": "numba-cuda"}) == "numba-cuda"
    assert project_of({"framework": "any"}) == ""  # a wording no one project owns
    entries: tuple[Gate | Known, ...] = (*load_gates(), *load_known())
    for entry in entries:
        if entry.release:
            assert entry.project, entry  # every mined message is counted for its project


def test_the_table_counts_distinct_projects_of_released_sources() -> None:
    entries: tuple[Gate | Known, ...] = (*load_gates(), *load_known())
    projects = {e.project for e in entries if e.release}
    assert len(projects) >= 40
    # the CUDA toolkit's parts, each its own package: counted apart, said so in the docs
    assert {"ptxas", "NVRTC", "CUDA runtime"} <= projects


def test_torch_1_13_old_gpu_warning_names_the_builds_lowest_target() -> None:
    # torch 1.13.1 torch/cuda/__init__.py:117-119 warns when the GPU is below min(get_arch_list())
    # and prints that minimum: a GTX 770 (3.0) under a build from sm_37 is older than every
    # target; CUDA 11.0 removed sm_30 (its release notes), so the last toolkit for it is 10.2
    text = (
        "/usr/lib/python3/site-packages/torch/cuda/__init__.py:132: UserWarning: \n"
        "    Found GPU0 NVIDIA GeForce GTX 770 which is of cuda capability 3.0.\n"
        "    PyTorch no longer supports this GPU because it is too old.\n"
        "    The minimum cuda capability supported by this library is 3.7.\n"
    )
    diagnosis = _explained(text)
    assert diagnosis.signature == "torch-found-gpu-capability"
    assert diagnosis.cause_status == "determined"  # the warning itself states the list's minimum
    assert "older than the oldest architecture this torch was built for (sm_37)" in (
        diagnosis.root_cause
    )
    assert "CUDA <= 10.2" in _fixes(diagnosis)


# ---------------------------------------------------------------- facts in any wording


@pytest.mark.parametrize(
    ("text", "need", "cc"),
    [
        ("RuntimeError: kernel requires sm_80 but the device is sm_75", "8.0", "7.5"),
        ("RuntimeError: this op needs compute capability 8.0, found 7.5", "8.0", "7.5"),
        ("AssertionError: requires compute capability >= 9.0, got 8.9", "9.0", "8.9"),
    ],
)
def test_a_required_and_a_found_capability_in_any_wording(text: str, need: str, cc: str) -> None:
    # whoever prints it, a GPU below the stated requirement is below it (NVIDIA's numbering)
    diagnosis = _explained(text)
    assert diagnosis.signature == "gate:any-requires-got"
    assert f"needs compute capability >= {need}; the GPU ({cc}) is older" in diagnosis.root_cause


@pytest.mark.parametrize(
    "text",
    [
        "RuntimeError: requires CUDA 12.8, got 12.4",  # a CUDA version, not a capability
        "RuntimeError: requires compute capability 7.0 but found 12 GB free",  # memory
    ],
)
def test_other_numbers_are_not_a_capability(text: str) -> None:
    assert _explained(text).signature != "gate:any-requires-got"


def test_a_found_capability_at_or_above_the_requirement_is_not_below_it() -> None:
    diagnosis = _explained("AssertionError: requires compute capability >= 8.0, got 8.6")
    assert "is older" not in diagnosis.root_cause
