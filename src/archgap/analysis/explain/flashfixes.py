"""FlashInfer's fixes for a diagnosis, from the shared fix engine (the ones scan prints).

Pure: the log, the examined environment's facts (if any), the log's version facts and the exact
compute capabilities in question in; ``EngineFixes`` out, or None where the engine's rules do not
apply (the log's evidence puts FlashInfer before the first release kb/jit.json models, or the
examined environment does not fail). Where the log names only the major ("SM 12.x"), the fixes
that hold on every GPU of it stay fixes and the others become one case per GPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from archgap.analysis.explain import causes as causes_
from archgap.analysis.explain.chain import Examined
from archgap.analysis.explain.logparse import ParsedLog
from archgap.analysis.explain.suggestions import CaseAnswer, FixSuggestion, suggestions
from archgap.analysis.fixes.engine import AVOID, Fix, FlashinferCase, flashinfer_fixes
from archgap.analysis.jit.flashinfer import flashinfer_findings
from archgap.analysis.verdicts.compat import ComputeCapability
from archgap.kb import toolchain as toolchain_kb
from archgap.kb.gpus import products
from archgap.probe.facts import ToolchainFacts

# The fix engine's fixes for each compute capability in question.
_PerGpu = dict[ComputeCapability, Sequence[Fix]]


@dataclass(frozen=True)
class EngineFixes:
    """The fix engine's fixes: all of them (a fix for one GPU of several says which), those that
    hold on every GPU in question, and, where the log names only the major, one case per GPU of
    it with the others."""

    fixes: tuple[FixSuggestion, ...]
    shared: tuple[FixSuggestion, ...]
    cases: tuple[CaseAnswer, ...] = ()


def engine_fixes(
    log: ParsedLog,
    examined: Examined | None,
    facts: Mapping[str, causes_.Known],
    ccs: Sequence[ComputeCapability],
    per_gpu: bool,
) -> EngineFixes | None:
    """The fix engine's FlashInfer fixes for the compute capabilities ``ccs`` (``per_gpu``: the
    log names no exact GPU, ``ccs`` are those of the major it names), or None when the log's
    evidence puts FlashInfer before the first release kb/jit.json models (0.3.1: no compilation
    context, the engine's rules do not apply)."""
    modelled = toolchain_kb.jit_rules().flashinfer.first_modelled
    if causes_.holds("flashinfer", f">={modelled}", facts) is False:
        return None
    if examined is not None and examined.toolchains is not None and examined.gpus:
        found = _examined_fixes(examined.toolchains, examined)
    else:
        found = _log_fixes(log, ccs, per_gpu)
    if found is None:
        return None
    fixes, each = found
    # Avoiding FlashInfer is the answer only when nothing else is (a GPU it does not support).
    fixes = [f for f in fixes if f.kind != AVOID] or fixes
    where = ", ".join(str(cc) for cc in ccs)
    source = f"archgap's fix engine for compute capability {where}"
    everything = suggestions(fixes, source)
    if not per_gpu or len(each) < 2:
        return EngineFixes(everything, everything)
    return _split_by_gpu(each, everything, source)


def _examined_fixes(
    toolchains: ToolchainFacts, examined: Examined
) -> tuple[list[Fix], _PerGpu] | None:
    """The fixes of the examined environment's failing FlashInfer findings (its ``toolchains``);
    None when it does not fail (then the signature's fixes stand)."""
    findings = flashinfer_findings(toolchains, examined.gpus, examined.driver)
    failing = [f for f in findings if f.status == "fails"]
    if not failing:
        return None
    return [fix for f in failing for fix in f.fixes], {}


def _log_fixes(
    log: ParsedLog, ccs: Sequence[ComputeCapability], per_gpu: bool
) -> tuple[list[Fix], _PerGpu] | None:
    """The fixes for each GPU in question from the log's FlashInfer and nvcc versions; None when
    the log's FlashInfer is older than the modelled releases (the signature's knowledge stands)."""
    version = next((e.value for e in log.evidence_of("flashinfer")), None)
    if (version and toolchain_kb.flashinfer_range(version) is None) or _older_wording(log):
        return None
    cuda = next(
        (e.value for k in ("nvcc", "flashinfer_cuda_version") for e in log.evidence_of(k)),
        None,
    )
    each: _PerGpu = {cc: flashinfer_fixes(FlashinferCase(version, cc, cuda)) for cc in ccs}
    return _said_for_gpu(each, per_gpu), each


def _said_for_gpu(each: _PerGpu, per_gpu: bool) -> list[Fix]:
    """Every GPU's fixes in turn; where the log may mean several GPUs, a fix that holds for only
    some of them says for which."""
    fixes: list[Fix] = []
    for cc, found in each.items():
        common = [all(f in other for other in each.values()) for f in found]
        fixes.extend(
            f if shared or not per_gpu else _for_gpu(f, cc)
            for f, shared in zip(found, common, strict=True)
        )
    return fixes


def _split_by_gpu(each: _PerGpu, everything: tuple[FixSuggestion, ...], source: str) -> EngineFixes:
    """The same fix on every GPU (its tradeoff may name each one's target) is a fix; the others
    are cases, one per GPU."""
    keyed = {cc: {_fix_key(f): f for f in found} for cc, found in each.items()}
    first = next(iter(keyed.values()))
    keys = [k for k in first if all(k in other for other in keyed.values())]
    everywhere = [_joined([(cc, found[k]) for cc, found in keyed.items()]) for k in keys]
    rest = {cc: [f for k, f in found.items() if k not in keys] for cc, found in keyed.items()}
    if not any(rest.values()):
        return EngineFixes(everything, everything)
    cases = tuple(_gpu_case(cc, own) for cc, own in rest.items())
    shared = suggestions([f for f in everywhere if f.kind != AVOID], source)
    return EngineFixes(everything, shared, cases)


def _gpu_case(cc: ComputeCapability, own: Sequence[Fix]) -> CaseAnswer:
    """The case of one GPU of the major: its own fixes (avoiding FlashInfer only when nothing
    else is)."""
    return CaseAnswer(
        f"if the GPU is {cc} ({_gpu_name(cc)})",
        "" if own else "no fix of its own: only the fixes that hold on every GPU",
        tuple(
            f"[{s.kind}] {s.text}"
            for s in suggestions([f for f in own if f.kind != AVOID] or own, "")
        ),
    )


def _fix_key(fix: Fix) -> tuple[str, str, str | None]:
    return (fix.kind, fix.action, fix.command)


def _joined(per_gpu: Sequence[tuple[ComputeCapability, Fix]]) -> Fix:
    """One fix that every GPU shares, its tradeoff said for each GPU where they differ."""
    fix = per_gpu[0][1]
    if len({f.tradeoff for _, f in per_gpu}) == 1:
        return fix
    said = (f"on {cc}: {f.tradeoff.rstrip('.')}" for cc, f in per_gpu)
    return replace(fix, tradeoff="; ".join(said) + ".")


def _gpu_name(cc: ComputeCapability) -> str:
    """A product of that compute capability, as a person knows it ("e.g. NVIDIA GB10 ...")."""
    name = next((p.name for p in products() if p.compute_capability == str(cc)), "")
    return f"e.g. {name}" if name else "no product known"


def _older_wording(log: ParsedLog) -> bool:
    """The log's FlashInfer gate is worded as no modelled release words it ("requires sm75+",
    0.2.x): the fix engine's rules (kb/jit.json's first modelled release on) do not apply."""
    known = {r.check_message.split(".")[0] for r in toolchain_kb.flashinfer_ranges()}
    gates = [t for _, t in log.messages if "FlashInfer requires" in t]
    return bool(gates) and not any(k in t for t in gates for k in known)


def _for_gpu(fix: Fix, cc: ComputeCapability) -> Fix:
    """A fix that holds for one compute capability only, said so ("on 12.1 (NVIDIA GB10 ...)")."""
    return replace(fix, action=f"on a {cc} GPU ({_gpu_name(cc)}): {fix.action}")
