"""A package's own gate: its check on the compute capability, settled by the GPU (a kernel
written for other architectures only, a table that lacks the GPU, or a family member's check)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from archgap.analysis.explain.causes import dotted
from archgap.analysis.explain.rules.facts import CONDITIONAL, DETERMINED, Case, LogFacts, Ruling
from archgap.analysis.explain.rules.words import gpu_words, torch_list, version_of
from archgap.analysis.fixes.engine import ENV, UPGRADE, Fix, worded
from archgap.kb.gpus import families

_ONLY_ON = re.compile(r"only support(?:ed on SM ?|s sm_?)(\d{2,3})\b", re.IGNORECASE)


_NEEDS = re.compile(r"compute capability (==|>=) (\d{1,2}\.\d)")
_FEATURE_TARGET = re.compile(r"requires \.target sm_(\d{2,3}) or higher")


def capability_gate(error: str, facts: LogFacts) -> Ruling | None:
    """A package's check on the compute capability, settled by the GPU: a kernel written for
    other architectures only (no rebuild adds it), or a table that does not list the GPU."""
    if len(facts.ccs) != 1:
        return None
    cc, gpu = facts.ccs[0], gpu_words(facts)
    package, module, who = _who(facts)
    needs = _NEEDS.search(error)
    wanted = _wanted(error, needs)
    if wanted and wanted != cc and _older_in_family(wanted, cc):
        return _family_gate(who, package, wanted, cc, facts)
    cause = _cause(who, wanted, needs, cc, gpu)
    return Ruling("capability-gate", cause, DETERMINED, _gate_fixes(package, module, cc))


def _who(facts: LogFacts) -> tuple[str, str, str]:
    """(package, module, the words for them) of the check: the innermost site-packages frame,
    else the package the log names."""
    package, module = raiser(facts.frames)
    package = package or next(iter(facts.stated.get("package", ())), "")
    who = f"{package} ({module})" if module else package or "the package"
    return package, module, who


def _wanted(error: str, needs: re.Match[str] | None) -> str | None:
    """The one capability the check accepts: "only supported on SM 90", "compute capability ==
    9.0"; None for a lower bound or none stated."""
    only = _ONLY_ON.search(error)
    if only:
        return dotted(only.group(1))
    return needs.group(2) if needs and needs.group(1) == "==" else None


def _older_in_family(wanted: str, cc: str) -> bool:
    """Whether ``wanted`` is an older member of the GPU's architecture family (kb/gpus.json)."""
    family = next((f for f in families() if cc in f and wanted in f), None)
    return bool(family) and version_of(wanted) < version_of(cc)


def _cause(who: str, wanted: str | None, needs: re.Match[str] | None, cc: str, gpu: str) -> str:
    """The check's cause: a kernel for another capability only, a lower bound above the GPU,
    else a table of capabilities that lacks it."""
    if wanted and wanted != cc:
        return (
            f"{who} has this kernel for {wanted} only{gpu}: it was written for that "
            f"architecture, so rebuilding for {cc} does not add it"
        )
    if needs and needs.group(1) == ">=" and version_of(cc) < version_of(needs.group(2)):
        return f"{who} needs compute capability >= {needs.group(2)}; the GPU is older{gpu}"
    return f"{who}'s check does not accept {cc}{gpu}: its table of capabilities lacks it"


def _gate_fixes(package: str, module: str, cc: str) -> tuple[Fix, ...]:
    """Run without the checked feature, or a release that implements it for the GPU."""
    without = (
        worded(
            "capability-without-module-feature", kind=ENV, package=package or "it", module=module
        )
        if module
        else worded("capability-without-feature", kind=ENV, package=package or "it")
    )
    release = worded(
        "capability-release-for-gpu", kind=UPGRADE, package=package or "package", cc=cc
    )
    return without, release


def _family_gate(who: str, package: str, wanted: str, cc: str, facts: LogFacts) -> Ruling:
    """A check for one member of an architecture family on a newer member (sm_120 only, on a
    GB10's 12.1): plain and family SASS of the older member runs on the newer one, so a literal
    check may be too strict; arch-specific SASS (sm_120a) runs on exactly its own capability.
    Which SASS the kernel is decides."""
    sm, own = wanted.replace(".", ""), cc.replace(".", "")
    name = package or "the package"
    cases = (
        Case(
            f"if the kernel is plain or family SASS (sm_{sm}, sm_{sm}f)",
            f"it runs on {cc} too (same family, newer minor): {who}'s check compares the "
            f"capability literally",
            (worded("capability-family-release", kind=UPGRADE, package=name, cc=cc),),
        ),
        Case(
            f"if the kernel is arch-specific SASS (sm_{sm}a)",
            f"it runs on {wanted} only: {cc} needs kernels built for sm_{own}a or sm_{sm}f",
            (worded("capability-family-without-feature", kind=ENV, package=name, cc=cc),),
        ),
    )
    cause = f"{who} accepts {wanted} only{gpu_words(facts)}, a member of the same family"
    decide = (
        f"which SASS {name} ships for the kernel: `archgap scan --gpu {cc}` (or cuobjdump "
        f"--list-elf on its library)",
    )
    fixes = tuple(f for c in cases for f in c.fixes)
    return Ruling("capability-gate", cause, CONDITIONAL, fixes, decide, cases)


def raiser(frames: Sequence[str]) -> tuple[str, str]:
    """(package, module) of the innermost frame in site-packages: ("sglang", "pdmux_context")."""
    for file in reversed(frames):
        path = file.replace("\\", "/")
        if "-packages/" in path:
            parts = path.split("-packages/", 1)[1].split("/")
            return parts[0], parts[-1].removesuffix(".py") if len(parts) > 1 else ""
    return "", ""


def feature_needs_arch(error: str, facts: LogFacts) -> Ruling | None:
    """ptxas refused an instruction for a target older than it needs ('Feature .m16n8k16
    requires .target sm_80 or higher'), settled by the GPU: one older than that target runs no
    build of those kernels (another code path, or a newer GPU); for one new enough, the build's
    arch list names an older target as well (build for the GPU alone)."""
    found = _FEATURE_TARGET.search(error)
    if found is None or len(facts.ccs) != 1:
        return None
    need, cc, gpu = dotted(found.group(1)), facts.ccs[0], gpu_words(facts)
    target = f"sm_{found.group(1)}"
    if need is not None and version_of(cc) < version_of(need):
        cause = (
            f"the GPU is older than {target}{gpu}, whose instructions these kernels use: no "
            "build of them runs on it, whatever the arch list"
        )
        fixes = (worded("feature-arch-gpu-older", kind=ENV, target=target, need=need),)
        return Ruling("feature-arch", cause, DETERMINED, fixes)
    sm = cc.replace(".", "")
    cause = (
        f"the build's arch list names a target older than {target}, which these kernels need; "
        f"the GPU itself is new enough{gpu}"
    )
    switches = torch_list(facts, cc)
    fixes = (worded("feature-arch-build-for-gpu", kind=ENV, sm=sm, torch_list=switches),)
    return Ruling("feature-arch", cause, DETERMINED, fixes)
