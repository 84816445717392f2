"""The rule for capability gates in frameworks' own words (``kb/gates.json``).

Pure. A gate's message carries facts (the minimum it needs, the GPU's capability, the compiler's
targets); the GPU's capability comes from the message, else from the rest of the log. The rule
then decides as NVIDIA's numbering does: a GPU below a framework's minimum runs no build of it
(the fix is another backend, an older release that still served it, or another GPU); a GPU below
a compiler's lowest target needs an older toolkit; a build with no code at or below the GPU was
built for newer GPUs only.
"""

from __future__ import annotations

from archgap.analysis.explain.causes import HOW_CC, dotted
from archgap.analysis.explain.rules import CONDITIONAL, DETERMINED, LogFacts, Ruling, raiser
from archgap.analysis.fixes.engine import AVOID, TOOLKIT, UPGRADE, Fix
from archgap.kb import toolchain as kb
from archgap.kb.gates import Gate


def gate_ruling(gate: Gate, error: str, facts: LogFacts) -> Ruling | None:
    """The ruling for ``error``, a message of ``gate``; None when the message does not carry
    what the rule needs or states a GPU that meets the minimum (then it is not this gap)."""
    found = gate.pattern.search(error)
    if found is None:
        return None
    got = {k: v for k, v in found.groupdict().items() if v}
    cc = dotted(got.get("cc", "")) or (facts.ccs[0] if len(facts.ccs) == 1 else None)
    listed = sorted(
        (c for c in (dotted(x) for x in got.get("list", "").replace(",", " ").split()) if c),
        key=_key,
    )
    need = dotted(got.get("need", "")) or gate.need or (listed[0] if listed else None)
    who = _who(gate, facts)
    if cc is None:
        return _unknown_gpu(gate, who, need)
    if need is not None and _key(cc) >= _key(need):
        return None  # the message's own facts say the GPU is not below it
    gpu = f" ({facts.gpu_name}, {cc})" if facts.gpu_name else f" ({cc})"
    if gate.rule == "toolkit-minimum":
        return _toolkit_minimum(who, got.get("tool", ""), cc, need, gpu)
    if gate.rule == "no-code-below":
        cause = (
            f"{who}'s build carries no code for compute capability {cc} or below: the "
            f"GPU{gpu} is older than every target it was built for"
            + (f"; {who} supports {need} and newer" if need else "")
        )
    else:
        cause = (
            f"{who} needs compute capability >= {need}; the GPU{gpu} is older, so no build "
            "or setting of it runs there"
        )
    return Ruling("framework-gate", cause, DETERMINED, _fixes(gate, who, cc, need))


def _fixes(gate: Gate, who: str, cc: str, need: str | None) -> tuple[Fix, ...]:
    fixes = [
        Fix(
            f"run without {who} on this GPU: another backend for what needs it, or the CPU",
            "the GPU, not a setting, decides",
            kind=AVOID,
        )
    ]
    if gate.older is not None and _key(cc) >= _key(gate.older.serves_from):
        fixes.append(
            Fix(
                f"install {gate.older.release} (it serves compute capability "
                f"{gate.older.serves_from} and newer)",
                gate.older.source,
                kind=UPGRADE,
            )
        )
    if need is not None:
        fixes.append(
            Fix(
                f"run it on a GPU with compute capability {need} or newer",
                f"{who}'s own minimum ({gate.source})",
                kind=AVOID,
            )
        )
    return tuple(fixes)


def _toolkit_minimum(who: str, tool: str, cc: str, need: str | None, gpu: str) -> Ruling:
    target = "sm_" + cc.replace(".", "")
    last = kb.last_toolkit_for(target)
    compiler = f"{who} {tool}".strip() if tool else who
    cause = (
        f"{compiler} cannot compile for compute capability {cc}: its lowest target is "
        f"{need or 'newer'}, and the GPU{gpu} is older"
        + (f" (CUDA dropped {target} after {last})" if last else "")
    )
    fixes = (
        Fix(
            f"use a CUDA toolkit (NVRTC/NVVM) that still builds {target}: CUDA {last} or older",
            "NVIDIA's toolkit release notes: the targets each release adds and drops",
            kind=TOOLKIT,
        )
        if last
        else Fix(
            f"use a CUDA toolkit whose compiler still builds {target}",
            "NVIDIA's toolkit release notes",
            kind=TOOLKIT,
        ),
    )
    return Ruling("framework-gate", cause, DETERMINED, fixes)


def _unknown_gpu(gate: Gate, who: str, need: str | None) -> Ruling | None:
    """The message names the minimum but the log names no GPU: which GPU decides."""
    if need is None:
        return None
    cause = f"{who} needs compute capability >= {need}; the log does not say the GPU's"
    decide = (f"the GPU's compute capability: {HOW_CC}",)
    return Ruling("framework-gate", cause, CONDITIONAL, _fixes(gate, who, need, need), decide)


def _who(gate: Gate, facts: LogFacts) -> str:
    if gate.framework != "any":
        return gate.framework
    package, _ = raiser(facts.frames)
    return package or next(iter(facts.stated.get("package", ())), "") or "the package"


def _key(cc: str) -> tuple[int, int]:
    major, _, minor = cc.partition(".")
    return int(major), int(minor or 0)
