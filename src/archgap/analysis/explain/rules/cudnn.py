"""cuDNN's CUDNN_STATUS_ARCH_MISMATCH: cuDNN documents it only as an architecture mismatch of the
GPU and the call, which leaves two causes apart; the answer names both and what decides between
them, never one of them alone."""

from __future__ import annotations

from archgap.analysis.explain.rules.facts import CONDITIONAL, Case, LogFacts, Ruling
from archgap.analysis.explain.rules.words import gpu_words
from archgap.analysis.fixes.engine import ENV, UPGRADE, worded

SUPPORT_MATRIX = (
    "https://docs.nvidia.com/deeplearning/cudnn/backend/latest/reference/support-matrix.html"
)


def cudnn_arch_mismatch(facts: LogFacts) -> Ruling:
    """Either this cuDNN has no kernels for the GPU, or the function called needs a newer GPU:
    whether the cuDNN release's support matrix lists the GPU's compute capability decides."""
    cc = facts.ccs[0] if len(facts.ccs) == 1 else None
    gpu = f"compute capability {cc}" if cc else "the GPU's compute capability"
    release = (
        worded("cudnn-release-for-cc", kind=UPGRADE, cc=cc, support_matrix=SUPPORT_MATRIX)
        if cc
        else worded("cudnn-release-for-gpu", kind=UPGRADE, support_matrix=SUPPORT_MATRIX)
    )
    call = worded("cudnn-call-for-gpu", kind=ENV)
    cases = (
        Case(
            f"if this cuDNN release's support matrix does not list {gpu}",
            f"this cuDNN has no kernels for the GPU{gpu_words(facts)}",
            (release,),
        ),
        Case(
            f"if it lists {gpu}",
            "the function called needs a feature of a newer architecture than the GPU's",
            (call,),
        ),
    )
    cause = (
        "cuDNN reports an architecture mismatch of the GPU and the call "
        f"(CUDNN_STATUS_ARCH_MISMATCH){gpu_words(facts)}: either this cuDNN release has no "
        "kernels for the GPU, or the function called needs a newer GPU"
    )
    decide = (
        "the cuDNN version (torch.backends.cudnn.version(), or the nvidia-cudnn wheel) against "
        f"its support matrix ({SUPPORT_MATRIX}), and {gpu}",
    )
    return Ruling("cudnn-arch", cause, CONDITIONAL, (release, call), decide, cases)
