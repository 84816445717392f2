"""explain claims a root cause only when the log's evidence pins it.

The FlashInfer facts used as expectations, read off the released flashinfer-python wheels on
PyPI (the files named below, at each version): ``check_cuda_arch`` raises at flashinfer/jit/core.py
line 59 in 0.3.0 and line 108 in 0.6.3-0.6.15; 0.2.x words it "FlashInfer requires sm75+", 0.3.0
and later "FlashInfer requires GPUs with sm75 or higher"; "SM 12.x requires CUDA >= 12.9" exists
only in 0.6.7-0.7.0. In 0.3.0 the gate takes its archs from torch's arch flags; the SM 12.x nvcc
check came in 0.6.7.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from archgap.analysis.explain.diagnosis import Diagnosis, explain
from archgap.analysis.explain.logparse import parse_log
from archgap.kb.signatures import (
    SignatureError,
    load_signatures,
    load_version_marks,
    parse_signatures,
    range_within,
    ranges_overlap,
)

GATE = "FlashInfer requires GPUs with sm75 or higher"


def _traceback(core_line: int) -> str:
    return (
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.12/site-packages/flashinfer/jit/core.py", line '
        f"{core_line}, in check_cuda_arch\n"
        f'    raise RuntimeError("{GATE}")\n'
        f"RuntimeError: {GATE}\n"
    )


ENV_5090 = "GPU 0: NVIDIA GeForce RTX 5090\nNVCC: Cuda compilation tools, release 12.8, V12.8.93\n"


def _diagnose(text: str) -> Diagnosis:
    return explain(parse_log(text), load_signatures())


def test_same_message_from_two_releases_gets_two_causes() -> None:
    # 0.6.3-0.6.15 (frame line 108) on SM 12.0 with nvcc 12.8: the swallowed nvcc check.
    new = _diagnose(ENV_5090 + "flashinfer-python==0.6.8\n" + _traceback(108))
    assert new.signature == "flashinfer-sm75-gate"
    assert new.cause_status == "determined"
    assert "0.6.7-0.7.0" in new.root_cause and "older than 12.9" in new.root_cause
    # 0.3.0 (frame line 59) on the same GPU: the arch list from torch was empty; no nvcc check
    # exists in that release, so the nvcc cause must not be named.
    old = _diagnose(ENV_5090 + _traceback(59))
    assert old.signature == "flashinfer-sm75-gate"
    assert old.cause_status == "determined"
    assert old.root_cause.startswith("flashinfer 0.3.0")
    assert "12.9" not in old.root_cause


def test_old_wording_never_gets_the_new_release_cause() -> None:
    d = _diagnose(ENV_5090 + "RuntimeError: FlashInfer requires sm75+\n")
    assert d.cause_status == "determined"
    assert d.root_cause.startswith("flashinfer 0.2.x")
    assert "0.6.7" not in d.root_cause
    # FLASHINFER_CUDA_ARCH_LIST does not exist before 0.3.1: not offered
    assert not any("FLASHINFER_CUDA_ARCH_LIST" in f.text for f in d.fixes)


def test_no_version_in_the_log_gives_a_conditional_diagnosis() -> None:
    d = _diagnose(f"RuntimeError: {GATE}\n")
    assert d.status == "diagnosed" and d.cause_status == "conditional"
    # one case per known cause the log leaves open, each with the condition that leads there
    whens = [c.when for c in d.cases]
    assert len(whens) >= 2 and any("compute capability is in [12.0, 13.0)" in w for w in whens)
    assert any("flashinfer-python is in [0.6.7, 0.7.1)" in w for w in whens)
    assert any("pip show flashinfer-python" in item for item in d.decide)
    assert any("nvidia-smi" in item for item in d.decide)


def test_versions_and_gpu_named_in_prose_are_evidence() -> None:
    # An issue's text, not a log: the GPU and the FlashInfer release are named in sentences.
    d = _diagnose(
        "I run vLLM with flashinfer 0.2.5 on my RTX 5090 and get\n"
        "RuntimeError: FlashInfer requires sm75+\n"
    )
    assert d.cause_status == "determined"
    assert d.root_cause.startswith("flashinfer 0.2.x")
    assert "flashinfer-python 0.2.5" in d.root_cause and "12.0" in d.root_cause


def test_frames_that_contradict_every_cause_leave_it_undetermined() -> None:
    # The SM 12.x message exists only in 0.6.7-0.7.0; a log printing flashinfer 0.5.3 next to it
    # is inconsistent, so no cause is claimed.
    d = _diagnose(
        "flashinfer: 0.5.3\nFailed to get device capability: SM 12.x requires CUDA >= 12.9.\n"
    )
    assert d.signature == "flashinfer-sm12-needs-cuda129"
    assert d.cause_status == "undetermined"
    assert "cause not determined for this version" in d.root_cause
    assert d.decide


def test_fixes_are_for_the_exact_gpu() -> None:
    # The same log (flashinfer 0.6.8, nvcc 12.8) on two SM 12.x GPUs. An RTX 5090 is 12.0:
    # sm_120a builds with nvcc 12.8, so FLASHINFER_CUDA_ARCH_LIST="12.0a" works. A GB10 is 12.1: a
    # 12.0a cubin does not run on it (an 'a' target runs only on its own capability) and sm_121a
    # needs nvcc 12.9 (CUDA 12.9 added sm_121), so no arch list helps; a toolkit >= 12.9 does.
    def fixes(gpu: str) -> list[str]:
        d = _diagnose(
            f"GPU 0: {gpu}\nflashinfer-python==0.6.8\n"
            "Cuda compilation tools, release 12.8, V12.8.93\n"
            "Failed to get device capability: SM 12.x requires CUDA >= 12.9.\n"
            f"RuntimeError: {GATE}\n"
        )
        return [f.text for f in d.fixes]

    rtx = fixes("NVIDIA GeForce RTX 5090")
    assert any('FLASHINFER_CUDA_ARCH_LIST="12.0a"' in t for t in rtx), rtx
    gb10 = fixes("NVIDIA GB10")
    assert not any("12.0a" in t or "FLASHINFER_CUDA_ARCH_LIST" in t for t in gb10), gb10
    assert any("12.9" in t for t in gb10), gb10


@pytest.mark.parametrize(
    ("text", "signature"),
    [
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
            "total capacity of 79.10 GiB",
            "cuda-out-of-memory",
        ),
        (
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
            "ProcessGroupNCCL.cpp:1970, unhandled cuda error, NCCL version 2.21.5",
            "nccl-error",
        ),
        (
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            "cuda-illegal-memory-access",
        ),
        (
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine.",
            "kv-cache-sizing",
        ),
        (
            "huggingface_hub.errors.GatedRepoError: 403 Client Error. Cannot access gated repo for "
            "url https://huggingface.co/meta-llama/Llama-3.1-8B/resolve/main/config.json.",
            "hub-download",
        ),
        (
            "ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/"
            "dependency-resolution/#dealing-with-dependency-conflicts",
            "pip-resolution",
        ),
    ],
)
def test_errors_that_are_not_architecture_gaps_get_no_architecture_cause(
    text: str, signature: str
) -> None:
    # Even next to a GPU the architecture gaps are about.
    d = _diagnose("GPU 0: NVIDIA GeForce RTX 5090\n" + text + "\n")
    assert d.status == "not-architecture"
    assert d.signature == signature
    assert d.root_cause == "" and d.fixes == () and d.root_signature is None


def test_ranges() -> None:
    assert ranges_overlap(">=0.6.3,<0.6.16", ">=0.6.7,<0.7.1")
    assert not ranges_overlap("<0.3.0", ">=0.6.7,<0.7.1")
    assert not ranges_overlap(">=0.7.1", "<0.7.1")
    assert ranges_overlap("==0.7.0", ">=0.6.7,<0.7.1")
    assert range_within(">=0.6.8,<0.6.16", ">=0.6.7,<0.7.1")
    assert not range_within(">=0.6.3,<0.6.16", ">=0.6.7,<0.7.1")
    assert range_within("==0.7.0", "<0.7.1")


def test_every_cause_condition_and_mark_is_well_formed() -> None:
    marks = load_version_marks()
    assert all(m.source.startswith("https://") for m in marks)
    for signature in load_signatures():
        for cause in signature.causes:
            assert cause.source.startswith("https://")
    bad = {
        "signatures": [
            {**_minimal(), "causes": [{"text": "x", "source": "s", "when": {"gpu": "1"}}]}
        ]
    }
    with pytest.raises(SignatureError):
        parse_signatures(bad)


def _minimal() -> dict[str, object]:
    return {
        "id": "x",
        "project": "p",
        "keywords": ["k"],
        "patterns": ["k"],
        "meaning": "m",
        "raise_sites": [],
        "fixes": [],
        "source": "s",
    }


@pytest.mark.parametrize(
    ("report", "arch"),
    [
        ("xla-6523-wgmma-sm90.log", "9.0a"),  # wgmma on plain sm_90: Hopper needs sm_90a
        ("fbgemm-4975-e2m1-sm120.log", "12.0a"),  # FP4 conversions on sm_120: needs sm_120a
        ("lmdeploy-3806-tensormap-sm120.log", "12.0a"),
    ],
)
def test_arch_specific_fix_names_the_target_of_the_failing_build(report: str, arch: str) -> None:
    # PTX ISA: wgmma/setmaxnreg need sm_90a, block-scaled MMA and e2m1 conversions sm_100a/sm_120a;
    # the plain target of the same GPU lacks them, so the fix is that GPU's 'a' target.
    corpus = Path(__file__).parent.parent / "fixtures" / "explain_corpus"
    d = _diagnose((corpus / report).read_text())
    assert d.signature == "ptxas-needs-arch-specific-target"
    env = next(f.text for f in d.fixes if f.kind == "env")
    assert f'TORCH_CUDA_ARCH_LIST="{arch}"' in env
    sm = arch.replace(".", "")
    assert f"arch=compute_{sm},code=sm_{sm}" in env


def test_instruction_of_another_architecture_is_not_an_a_suffix_problem() -> None:
    # SageAttention#291: wgmma exists only on sm_90a; no suffix makes it compile for sm_120.
    corpus = Path(__file__).parent.parent / "fixtures" / "explain_corpus"
    d = _diagnose((corpus / "sageattention-291-wgmma-sm120.log").read_text())
    assert d.signature == "ptxas-instruction-not-on-arch"
    assert not any("12.0a" in f.text for f in d.fixes)
    assert any('TORCH_CUDA_ARCH_LIST="12.0"' in f.text for f in d.fixes)


def test_recognised_capabilities_are_the_gpus_not_the_builds_arch_list() -> None:
    # torch's warning names the GPU's sm_120 and then the build's list sm_50 ... sm_90.
    corpus = Path(__file__).parent.parent / "fixtures" / "explain_corpus"
    d = _diagnose((corpus / "leggedlab-26-torch-sm120.log").read_text())
    assert d.recognised.compute_capabilities == ("12.0",)
    assert not any("sm_50" in s.text or "50, 60" in s.text for s in d.steps)
