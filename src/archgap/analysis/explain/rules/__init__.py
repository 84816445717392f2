"""Facts, then rules: the cause of a recognised error decided by the knowledge scan uses.

Pure. A signature recognises a message and extracts its fields (the target a compiler was asked
for, the PTX ISA versions, TensorRT's SM); ``log_facts`` adds what the rest of the log states:
which tool printed the error (nvcc, NVRTC, Triton's or XLA's ptxas, the driver's JIT linker,
TensorRT), the CUDA version of that tool, the GPU in any spelling (the GPU table), a Jetson, the
package whose kernels are missing. ``decide`` then applies one rule per kind of error, with the
toolkit table (targets each CUDA release adds and drops, its PTX ISA, its minimum driver), the GPU
table and TensorRT's support table: which way a gap goes (a toolkit too old for the target, or
newer than a target it dropped), and fixes for the exact GPU and the tool that failed. A rule
that lacks a fact it needs says which one (``Ruling.decide``); a rule that does not apply gives
None and the signature's own knowledge answers.

One module per rule family: ``toolkit`` (a compiler rejected a target), ``nvrtc``, ``ptx`` (PTX
ISA), ``tensorrt``, ``torch_archs`` (torch's arch list), ``kernel_image`` (no kernel image) and
``capability`` (a package's own gate), ``cudnn`` (cuDNN's ARCH_MISMATCH); ``facts`` holds what
they read and answer, ``words`` what they all say. ``decide`` picks the rule by the signature's
id (``RULES``).
"""

from __future__ import annotations

from collections.abc import Callable

from archgap.analysis.explain.rules.capability import capability_gate, feature_needs_arch, raiser
from archgap.analysis.explain.rules.cudnn import cudnn_arch_mismatch
from archgap.analysis.explain.rules.facts import (
    CONDITIONAL,
    DETERMINED,
    DRIVER,
    NVCC,
    NVRTC,
    PTXAS,
    TENSORRT,
    TRITON,
    XLA,
    Case,
    LogFacts,
    Ruling,
    log_facts,
)
from archgap.analysis.explain.rules.kernel_image import no_kernel_image
from archgap.analysis.explain.rules.nvrtc import cupy_compiles
from archgap.analysis.explain.rules.ptx import ptx_isa
from archgap.analysis.explain.rules.tensorrt import tensorrt
from archgap.analysis.explain.rules.toolkit import toolkit_target
from archgap.analysis.explain.rules.torch_archs import torch_archs

__all__ = [
    "CONDITIONAL",
    "DETERMINED",
    "DRIVER",
    "NVCC",
    "NVRTC",
    "PTXAS",
    "RULES",
    "TENSORRT",
    "TRITON",
    "XLA",
    "Case",
    "LogFacts",
    "Ruling",
    "decide",
    "log_facts",
    "raiser",
]

Rule = Callable[[str, LogFacts], Ruling | None]  # (the error's message, the log's facts)


def _of_facts(rule: Callable[[LogFacts], Ruling | None]) -> Rule:
    """A rule that reads the log's facts, not the message."""
    return lambda error, facts: rule(facts)


def _xla_target(error: str, facts: LogFacts) -> Ruling | None:
    return toolkit_target(error, facts, tool=XLA)


def _cupy_kernel_image(error: str, facts: LogFacts) -> Ruling | None:
    """CuPy's kernel with no image for the GPU ('device kernel image is invalid')."""
    if "cupy" not in facts.stated.get("package", ()):
        return None
    return cupy_compiles(facts) if len(facts.ccs) == 1 else None


# The rule for each signature id it decides; a signature not here answers with its own knowledge.
RULES: dict[str, Rule] = {
    "nvcc-unsupported-gpu-arch": toolkit_target,
    "ptxas-unknown-gpu-name": toolkit_target,
    "nvrtc-invalid-arch": toolkit_target,
    "ptxas-unsupported-ptx-version": _of_facts(ptx_isa),
    "cuda-unsupported-ptx-toolchain": _of_facts(ptx_isa),
    "xla-ptxas-too-old": _xla_target,
    "tensorrt-unsupported-sm": _of_facts(tensorrt),
    "torch-sm-not-compatible": _of_facts(torch_archs),
    "torch-found-gpu-capability": _of_facts(torch_archs),
    "torch-supported-archs": _of_facts(torch_archs),
    "cuda-no-kernel-image": _of_facts(no_kernel_image),
    "cuda-invalid-device-function": _of_facts(no_kernel_image),  # the same gap, older wording
    "cuda-device-kernel-image-invalid": _cupy_kernel_image,
    "capability-gate": capability_gate,
    "ptxas-feature-needs-newer-arch": feature_needs_arch,
    "cudnn-status-arch-mismatch": _of_facts(cudnn_arch_mismatch),
}


def decide(signature_id: str, error: str, facts: LogFacts) -> Ruling | None:
    """The ruling for a recognised error (``error``: its message), or None when no rule here
    applies to it."""
    rule = RULES.get(signature_id)
    return rule(error, facts) if rule is not None else None
