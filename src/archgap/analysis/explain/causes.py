"""Which of a signature's known causes the log's evidence supports, and fixes for the exact GPU.

Pure. A cause applies under version ranges (``when``: the package's version, the GPU's compute
capability, the nvcc); the log's evidence is what it prints (package versions, nvcc banners, GPU
names and capabilities, also in prose) and what pins a version range without printing it (a
message wording that changed between releases, a frame's line in a released file). A cause is
claimed only when every condition it has is known and holds; when some are unknown the answer is
conditional ("if flashinfer is 0.6.7-0.7.0 ..."), when every cause is contradicted it is "cause
not determined for this version", each with what would decide it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from archgap.analysis.explain.logparse import ParsedLog, TracebackFrame
from archgap.analysis.verdicts.compat import GpuTarget
from archgap.kb.gpus import completions, find_products, identify
from archgap.kb.signatures import (
    Cause,
    Fix,
    VersionMark,
    range_within,
    ranges_overlap,
    version_in,
)
from archgap.kb.toolchain import major_minor

DETERMINED = "determined"  # every condition of the cause is known from the evidence and holds
CONDITIONAL = "conditional"  # no cause contradicted, but the evidence does not pin one down
UNDETERMINED = "undetermined"  # the evidence contradicts every known cause

# Which evidence of the log (logparse kinds) states each condition kind.
_EVIDENCE_KINDS: Mapping[str, tuple[str, ...]] = {
    "flashinfer": ("flashinfer",),
    "torch": ("torch",),
    "triton": ("triton",),
    "nvcc": ("nvcc", "flashinfer_cuda_version"),
    "driver_cuda": ("driver_cuda",),
    "vllm": ("vllm",),
    "sglang": ("sglang",),
    "flash_attn": ("flash_attn",),
}
_LABELS: Mapping[str, str] = {
    "cc": "the GPU's compute capability",
    "flashinfer": "flashinfer-python",
    "torch": "torch",
    "triton": "triton",
    "nvcc": "the nvcc in use",
    "driver_cuda": "the driver's CUDA version",
    "vllm": "vllm",
    "sglang": "sglang",
    "flash_attn": "flash-attn",
}
# How to find out what a condition needs.
HOW_CC = "`nvidia-smi --query-gpu=name,compute_cap --format=csv`"
_HOW: Mapping[str, str] = {
    "cc": HOW_CC,
    "flashinfer": "`pip show flashinfer-python`",
    "torch": "`python -c 'import torch; print(torch.__version__, torch.version.cuda)'`",
    "triton": "`pip show triton`",
    "nvcc": "`$CUDA_HOME/bin/nvcc --version` (else the nvcc on PATH)",
    "driver_cuda": "`nvidia-smi` (its 'CUDA Version')",
    "vllm": "`pip show vllm`",
    "sglang": "`pip show sglang`",
    "flash_attn": "`pip show flash-attn`",
}
# The capability a GPU family has, for fixes when the log names no GPU.
CC_EXAMPLES = "9.0 H100/H200, 10.0 B200/GB200, 10.3 B300, 12.0 RTX 50xx/RTX PRO 6000, 12.1 GB10"


@dataclass(frozen=True)
class Known:
    """What the evidence says about one condition kind."""

    exact: tuple[str, ...]  # versions printed ("0.6.8"), capabilities ("12.0")
    ranges: tuple[tuple[str, str], ...]  # (range, why) pinned by wordings and frames
    said: str  # "flashinfer 0.6.8 (log line 3)" for the verdict's wording


@dataclass(frozen=True)
class Judgement:
    status: str  # DETERMINED, CONDITIONAL, UNDETERMINED
    cause: Cause | None  # the claimed cause (DETERMINED)
    candidates: tuple[Cause, ...]  # the causes the evidence does not contradict
    evidence: tuple[str, ...]  # what the judgement rests on
    decide: tuple[str, ...]  # what would decide it


def gpu_capabilities(log: ParsedLog, examined_gpus: Sequence[GpuTarget] = ()) -> tuple[str, ...]:
    """The compute capabilities of the GPU(s) the log is about, dotted ("12.1"): the examined
    GPUs, else the capabilities the log states of a GPU, else the GPUs it names."""
    if examined_gpus:
        return tuple(dict.fromkeys(str(g.compute_capability) for g in examined_gpus))
    stated = [cc for e in log.evidence_of("gpu_cc") if (cc := dotted(e.value))]
    if stated:
        return tuple(dict.fromkeys(stated))
    named = [cc for e in log.evidence_of("gpu") if (cc := product_cc(e.value))]
    return tuple(dict.fromkeys(named))


def product_cc(name: str) -> str | None:
    """The capability of a GPU the log names: the driver's name, else a short product name
    ("RTX 5090", "GB10") or a name nvidia-smi truncated ("GeForce RTX 208...") when every
    product it may mean has the same capability."""
    product = identify(name)
    if product is not None:
        return product.compute_capability
    found = completions(name) if name.endswith("...") else find_products(name)
    capabilities = {p.compute_capability for p in found}
    return capabilities.pop() if len(capabilities) == 1 else None


def dotted(value: str) -> str | None:
    """ "sm_121a", "121", "12.1" -> "12.1"."""
    value = value.strip().lower().removeprefix("sm_").removeprefix("compute_").rstrip("af")
    if "." in value:
        parts = major_minor(value)
        return f"{parts[0]}.{parts[1]}" if parts else None
    if value.isdigit() and len(value) in (2, 3):
        return f"{value[:-1]}.{value[-1]}"
    return None


def version_facts(
    log: ParsedLog,
    texts: Iterable[str],
    marks: Sequence[VersionMark],
    gpus: Sequence[GpuTarget] = (),
) -> dict[str, Known]:
    """Per condition kind, what the log states: printed versions, and the ranges its error
    wordings (``texts``) and its frames pin."""
    facts: dict[str, Known] = {}
    ccs = gpu_capabilities(log, gpus)
    if ccs:
        facts["cc"] = Known(ccs, (), f"GPU compute capability {', '.join(ccs)}")
    frames = [f for tb in log.tracebacks for f in tb.frames]
    joined = list(texts)
    for kind, evidence_kinds in _EVIDENCE_KINDS.items():
        printed = [e for k in evidence_kinds for e in log.evidence_of(k)]
        exact = tuple(dict.fromkeys(e.value for e in printed))
        ranges = tuple(_pinned(kind, marks, joined, frames))
        if not exact and not ranges:
            continue
        said = [f"{_LABELS[kind]} {e.value} (log line {e.line})" for e in printed[:2]]
        said += [f"{_LABELS[kind]} {_readable(spec)} ({why})" for spec, why in ranges[:2]]
        facts[kind] = Known(exact, ranges, "; ".join(said))
    return facts


def _pinned(
    kind: str, marks: Sequence[VersionMark], texts: Sequence[str], frames: Sequence[TracebackFrame]
) -> Iterable[tuple[str, str]]:
    for mark in marks:
        if mark.kind != kind:
            continue
        if mark.wording and any(mark.wording in t for t in texts):
            yield mark.versions, f"the wording '{mark.wording}'"
            continue
        for frame in frames:
            if (
                mark.file
                and frame.line == mark.line
                and frame.file.replace("\\", "/").endswith(mark.file)
                and (not mark.function or frame.function == mark.function)
            ):
                yield mark.versions, f"frame {mark.file}:{mark.line} in {frame.function}"
                break


def holds(kind: str, spec: str, facts: Mapping[str, Known]) -> bool | None:
    """Whether the evidence says the condition holds (None: not known)."""
    known = facts.get(kind)
    if known is None:
        return None
    if known.exact:
        return any(version_in(value, spec) for value in known.exact)
    if any(not ranges_overlap(pinned, spec) for pinned, _ in known.ranges):
        return False
    if any(range_within(pinned, spec) for pinned, _ in known.ranges):
        return True
    return None


def judge(causes: Sequence[Cause], facts: Mapping[str, Known]) -> Judgement:
    """The cause the evidence supports, or why none can be named."""
    candidates: list[Cause] = []
    unknown: dict[str, None] = {}
    for cause in causes:
        results = {kind: holds(kind, spec, facts) for kind, spec in cause.when}
        if any(r is False for r in results.values()):
            continue
        candidates.append(cause)
        unknown.update({kind: None for kind, r in results.items() if r is None})
    used = tuple(k.said for k in facts.values())
    decide = tuple(f"{_LABELS[k]}: {_HOW[k]}" for k in unknown)
    if not candidates:
        kinds = {kind for cause in causes for kind, _ in cause.when}
        decide = tuple(f"{_LABELS[k]}: {_HOW[k]}" for k in sorted(kinds))
        return Judgement(UNDETERMINED, None, (), used, decide)
    first = candidates[0]
    if all(holds(kind, spec, facts) for kind, spec in first.when):
        return Judgement(DETERMINED, first, tuple(candidates), used, ())
    return Judgement(CONDITIONAL, None, tuple(candidates), used, decide)


def condition_text(cause: Cause) -> str:
    """ "flashinfer-python >=0.6.7,<0.7.1 and the nvcc in use <12.9"."""
    return " and ".join(f"{_LABELS[kind]} is {_readable(spec)}" for kind, spec in cause.when)


def _readable(spec: str) -> str:
    match = re.fullmatch(r">=\s*(\S+?)\s*,\s*<\s*(\S+)", spec.strip())
    if match:
        return f"in [{match[1]}, {match[2]})"
    return spec.replace(",", " and ")


def fix_applies(fix: Fix, ccs: Sequence[str], facts: Mapping[str, Known]) -> bool:
    """A fix is offered unless the evidence rules it out (another GPU major, another version)."""
    majors = {int(cc.split(".")[0]) for cc in ccs}
    if fix.applies_to_cc_major is not None and majors and fix.applies_to_cc_major not in majors:
        return False
    return all(holds(kind, spec, facts) is not False for kind, spec in fix.when)


def for_gpu(text: str, ccs: Sequence[str]) -> str:
    """A fix's text for the exact GPU: ``{cc}`` -> "12.1", ``{sm}`` -> "121"; with no single GPU
    known, a placeholder (``placeholder_legend`` says what it stands for, once)."""
    if "{cc}" not in text and "{sm}" not in text:
        return text
    if len(ccs) == 1:
        return text.replace("{cc}", ccs[0]).replace("{sm}", ccs[0].replace(".", ""))
    return text.replace("{cc}", "<CC>").replace("{sm}", "<SM>")


def placeholder_legend(texts: Iterable[str]) -> str:
    """What the placeholders of fixes for no single known GPU stand for, said once."""
    joined = " ".join(texts)
    names = ["<CC> = the GPU's compute capability"] if "<CC>" in joined else []
    names += ["<SM> = the compute capability without the dot"] if "<SM>" in joined else []
    return f"{', '.join(names)}: {CC_EXAMPLES}" if names else ""
