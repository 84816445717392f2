"""Toolkit targets: a compiler (nvcc, ptxas, XLA's ptxas, NVRTC) rejected a target because the
toolkit predates it, or is newer than a release that dropped it (kb/toolkits.json's targets per
release); a ptxas or nvcc other than the log's CUDA; Thor's renumbered target."""

from __future__ import annotations

import re

from archgap.analysis.explain.rules.arch_token import not_an_arch
from archgap.analysis.explain.rules.facts import (
    CONDITIONAL,
    DETERMINED,
    NVCC,
    NVRTC,
    PTXAS,
    TRITON,
    XLA,
    Case,
    LogFacts,
    Ruling,
)
from archgap.analysis.explain.rules.nvrtc import nvrtc_cuda, nvrtc_fix, nvrtc_without_gpu
from archgap.analysis.explain.rules.words import dropped_words, gpu_words, torch_list, version_of
from archgap.analysis.fixes.engine import ENV, TOOLKIT, Fix, toolkit_limit, worded
from archgap.kb import toolchain as kb
from archgap.kb.gpus import Renumbered, renumbered

_TARGET = re.compile(r"\b(?:sm|compute)_(\d{2,3}[af]?)\b")


def _target_of(error: str, facts: LogFacts) -> str | None:
    found = _TARGET.search(error)
    if found:
        return f"sm_{found.group(1)}"
    cc = re.search(r"CC (\d{1,2}\.\d)", error)  # XLA: "ptxas does not support CC 9.0"
    if cc:
        return f"sm_{cc.group(1).replace('.', '')}"
    option = facts.first("arch_option")  # NVRTC's options: -arch=compute_61
    if option:
        return f"sm_{option}"
    return f"sm_{facts.ccs[0].replace('.', '')}" if len(facts.ccs) == 1 else None


def toolkit_target(error: str, facts: LogFacts, tool: str = "") -> Ruling | None:
    """A compiler rejected a target: the toolkit predates it, or is newer than a release that
    dropped it (kb/toolkits.json's targets per release). Triton's ptxas is the signature's."""
    tool = tool or facts.tool or PTXAS
    token = not_an_arch(error, facts, tool)  # `compute_1.`, `native`: the build script's
    if token is not None:
        return token
    target = _target_of(error, facts)
    span = _span(target) if target else None
    if target is None and tool == NVRTC:
        return nvrtc_without_gpu(facts)
    if tool == TRITON or target is None or span is None:
        return None
    return _judged(tool, target, span[0], span[1], facts)


# (cause, whether the log determines it, whether the toolkit is newer than the target's releases)
_Verdict = tuple[str, bool, bool]


def _judged(tool: str, target: str, first: str, last: str | None, facts: LogFacts) -> Ruling:
    """The ruling on a target that CUDA ``first`` .. ``last`` builds: by the tool's CUDA where
    the log states it, else by the other tool that ran, else conditional on the tool's CUDA."""
    have = _cuda_of(tool, facts)
    verdict = _stated(tool, target, have, first, last)
    if verdict is None:
        other = _another_tool(tool, target, have, first, last, facts)
        if other is not None:
            return other
        if last and not kb.long_dropped(last):
            return _either_way(tool, target, first, last, facts)
        verdict = _unstated(tool, target, first, last)
    return _ruled(tool, target, first, last, verdict, facts)


def _cuda_of(tool: str, facts: LogFacts) -> str | None:
    """The CUDA of the tool that ran, where the log states it: NVRTC's own, the toolkit's for
    nvcc and ptxas, none for XLA's ptxas."""
    if tool == NVRTC:
        return nvrtc_cuda(facts)
    return facts.toolkit if tool in (NVCC, PTXAS) else None


def _stated(
    tool: str, target: str, have: str | None, first: str, last: str | None
) -> _Verdict | None:
    """The determined cause where the tool's CUDA is outside the target's releases: newer than
    the last that builds it, or older than the first."""
    if have and last and version_of(have) > version_of(last):
        dropped = dropped_words(target, last)
        return f"{tool} is CUDA {have}, newer than {target}: {dropped}", True, True
    if have and version_of(have) < version_of(first):
        needs = f"{target} needs CUDA >= {first}"
        return f"{tool} is CUDA {have}, older than {target}: {needs}", True, False
    return None


def _another_tool(
    tool: str, target: str, have: str | None, first: str, last: str | None, facts: LogFacts
) -> Ruling | None:
    """A ptxas or nvcc rejected a target that the CUDA the log states builds: the one that ran
    is another toolkit's."""
    if tool == PTXAS and (stack := have or facts.torch_cuda) and _builds(stack, target):
        # the CUDA the log states (its toolkit, or torch's build) builds the target, yet a ptxas
        # rejected it: the ptxas that ran is another one (a bundled one such as Triton's, or an
        # older toolkit's on PATH)
        return _other_ptxas(target, stack, facts)
    if tool == NVCC and have and _builds(have, target):
        return _other_nvcc(target, have, first, last, facts)
    return None


def _unstated(tool: str, target: str, first: str, last: str | None) -> _Verdict:
    """The conditional cause with no CUDA stated, where the target's releases leave one answer:
    a target no toolkit of the last years builds (kb/toolkits.json "long_dropped"), so the one
    in use most likely dropped it; or one no release dropped, so the one in use predates it."""
    if kb.long_dropped(last):
        return f"{dropped_words(target, last)}; the {tool} in use is newer than that", False, True
    return f"the {tool} in use predates {target}: {target} needs CUDA >= {first}", False, False


def _either_way(tool: str, target: str, first: str, last: str, facts: LogFacts) -> Ruling:
    """A toolkit too old or too new both reject the target: the toolkit's version decides."""
    needs = f"{target} needs CUDA >= {first}"
    newer_fixes = _target_fixes(tool, target, first, last, True, facts)
    older_fixes = _target_fixes(tool, target, first, last, False, facts)[-1:]
    cases = (
        Case(
            f"if {tool} is CUDA > {last}",
            f"{dropped_words(target, last)}; the {tool} is newer",
            newer_fixes,
        ),
        Case(
            f"if {tool} is CUDA < {first}",
            f"the {tool} predates {target}: {needs}",
            older_fixes,
        ),
    )
    cause = (
        f"{tool} is either newer than the last release that builds {target} or older than the first"
    )
    return Ruling(
        "toolkit-target",
        f"{cause}{gpu_words(facts)}",
        CONDITIONAL,
        newer_fixes + older_fixes,
        _decide(tool),
        cases,
    )


def _ruled(
    tool: str, target: str, first: str, last: str | None, verdict: _Verdict, facts: LogFacts
) -> Ruling:
    """The ruling on a verdict: its fixes, Thor's renumbering named, the tool's CUDA to decide
    where the log leaves it open."""
    cause, determined, newer = verdict
    fixes = _target_fixes(tool, target, first, last, newer, facts)
    found = _renumbered(target)
    if found:  # Thor: sm_101 up to CUDA 12.9, sm_110 from 13.0
        cause += f" (CUDA {found[0].toolkit} renumbered sm_{found[0].old.replace('.', '')} as "
        cause += f"sm_{found[0].new.replace('.', '')}: the same GPU)"
    if determined:
        return Ruling("toolkit-target", f"{cause}{gpu_words(facts)}", DETERMINED, fixes)
    return Ruling("toolkit-target", f"{cause}{gpu_words(facts)}", CONDITIONAL, fixes, _decide(tool))


def _decide(tool: str) -> tuple[str, ...]:
    """What decides a conditional ruling: the tool's CUDA version."""
    return (f"the CUDA version of {tool}: `nvcc --version` (or the package's CUDA build)",)


def _renumbered(target: str) -> tuple[Renumbered, bool] | None:
    """The renumbering a target is part of (kb/gpus.json: Thor's sm_101 is sm_110 from CUDA
    13.0), and whether the target is the old number."""
    plain = target.rstrip("af")
    for r in renumbered():
        if plain in (f"sm_{r.old.replace('.', '')}", f"sm_{r.new.replace('.', '')}"):
            return r, plain == f"sm_{r.old.replace('.', '')}"
    return None


def _renumbered_fixes(target: str, newer: bool) -> tuple[Fix, ...]:
    """A dropped old number is the same GPU under its new number, and the reverse."""
    found = _renumbered(target)
    if found is None:
        return ()
    r, is_old = found
    old_sm, new_sm = r.old.replace(".", ""), r.new.replace(".", "")
    if newer and is_old:
        return (
            worded(
                "toolkit-renumbered-new-number",
                kind=ENV,
                new_sm=new_sm,
                old_sm=old_sm,
                new_cc=r.new,
                toolkit=r.toolkit,
                source=r.source,
            ),
        )
    if not newer and not is_old:
        return (
            worded(
                "toolkit-renumbered-old-number",
                kind=ENV,
                toolkit=r.toolkit,
                old_sm=old_sm,
                source=r.source,
            ),
        )
    return ()


def _other_ptxas(target: str, have: str, facts: LogFacts) -> Ruling:
    """A ptxas rejected a target that the log's own CUDA builds: that ptxas is not the CUDA's."""
    cause = (
        f"the log's CUDA {have} builds {target}, so the ptxas that rejected it is another, "
        f"older one: a ptxas a package bundles (Triton's, in a torch or vLLM process) or an "
        f"older toolkit's first on PATH"
    )
    fixes = (
        worded("toolkit-triton-ptxas", kind=ENV, cuda=have),
        worded("toolkit-ptxas-on-path", kind=ENV, cuda=have),
    )
    return Ruling("toolkit-target", f"{cause}{gpu_words(facts)}", DETERMINED, fixes)


def _other_nvcc(target: str, have: str, first: str, last: str | None, facts: LogFacts) -> Ruling:
    """nvcc rejected a target that the CUDA the log names builds: the nvcc that ran is another
    toolkit's (an older one on PATH, such as a distribution's /usr/bin/nvcc, or one past the
    release that dropped the target), not the one the report installed."""
    outside = f"CUDA < {first}" + (f" or > {last}" if last else "")
    cause = (
        f"the log's CUDA {have} builds {target}, so the nvcc that ran is another toolkit's "
        f"({outside}): one found first on PATH or through CUDA_HOME, not CUDA {have}"
    )
    fixes = (
        worded("toolkit-nvcc-first", kind=ENV, cuda=have, target=target),
        worded("toolkit-remove-other-nvcc", kind=TOOLKIT),
    )
    return Ruling("toolkit-target", f"{cause}{gpu_words(facts)}", DETERMINED, fixes)


def _span(target: str) -> tuple[str, str | None] | None:
    """The CUDA releases that build ``target``: its own entry where the table has one (sm_100f
    arrives in CUDA 12.9, not with sm_100 in 12.8), else the plain target's."""
    return kb.toolkit_range_for(target) or kb.toolkit_range_for(target.rstrip("af"))


def _builds(cuda: str, target: str) -> bool:
    span = _span(target)
    return span is not None and version_of(span[0]) <= version_of(cuda) <= version_of(
        span[1] or cuda
    )


def _target_fixes(
    tool: str, target: str, first: str, last: str | None, newer: bool, facts: LogFacts
) -> tuple[Fix, ...]:
    gpu_target = f"sm_{facts.ccs[0].replace('.', '')}" if len(facts.ccs) == 1 else None
    not_the_gpu = gpu_target is not None and gpu_target != target.rstrip("af")
    fixes: list[Fix] = list(_renumbered_fixes(target, newer))
    if tool == XLA:
        need = toolkit_limit(gpu_target or target) or f"CUDA >= {first}"
        fixes.append(worded("toolkit-xla-ptxas", kind=TOOLKIT, cuda_range=need))
        return tuple(fixes)
    if tool == NVRTC:
        return (nvrtc_fix(newer, target, last, first, facts),)
    if not_the_gpu and gpu_target:
        cc = facts.ccs[0]
        fixes.append(
            worded(
                "toolkit-build-for-gpu",
                kind=ENV,
                target=target,
                sm=cc.replace(".", ""),
                cc=cc,
                gpu=facts.gpu_name or "GPU",
                torch_list=torch_list(facts, cc),
            )
        )
    elif newer:
        fixes.append(
            worded("toolkit-remove-target", kind=ENV, target=target, torch_list=torch_list(facts))
        )
    if newer:
        fixes.append(worded("toolkit-older", kind=TOOLKIT, last=last, target=target))
    else:
        fixes.append(worded("toolkit-newer", kind=TOOLKIT, first=first, target=target))
    return tuple(fixes)
