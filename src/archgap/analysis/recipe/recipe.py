"""Build recipes: the fewest build targets whose device code runs natively on every GPU of a set.

Pure. The targets are chosen with the same rules the verdicts use (``compat.sass_runs_on``), from
the targets the chosen toolkit accepts (``kb/toolkits.json``), and every recipe carries its own
proof: the verdict (``verdicts.library_verdict``) of a library holding exactly the recipe's
targets, per GPU. A GPU the toolkit cannot build for shows up there as ``jit`` or ``none``.

Two kinds of recipe:
- plain (default): ``sm_XY`` SASS, which runs on X.Z for every Z >= Y (same major), plus
  ``compute_XY`` PTX of the newest target, which the driver JIT-compiles for newer GPUs;
- arch-specific (``arch_specific=True``): kernels that use arch-specific instructions (wgmma/TMA
  multicast on 9.0, tcgen05 on 10.x) need ``sm_XYa`` (exactly X.Y) or ``sm_XYf`` (its family).
  An ``f`` target is taken when it covers more GPUs of the set than an ``a`` target would.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from archgap.analysis.recipe.target import Target
from archgap.analysis.verdicts.compat import (
    ComputeCapability,
    GpuTarget,
    ptx_jits_on,
    sass_runs_on,
)
from archgap.analysis.verdicts.verdicts import NATIVE, library_verdict
from archgap.errors import EXIT_GAP, EXIT_OK
from archgap.kb.gpus import integrated, renumbered
from archgap.kb.toolchain import (
    first_toolkit_for,
    last_toolkit_for,
    major_minor,
    targets_of,
    toolkit_releases,
)
from archgap.probe.facts import BinaryFacts, EntryKind, KernelEntry, ProbeResponse, as_variant

_SM = re.compile(r"^sm_(\d{2,3})([af]?)$")
VARIANT_RANK = {"a": 2, "f": 1, "": 0}  # between targets covering as many GPUs: features first


@dataclass(frozen=True)
class GpuProof:
    """The verdict of the recipe's own output on one GPU of the set."""

    gpu: str
    compute_capability: str
    verdict: str
    reason: str
    note: str | None  # why the toolkit could not do better (dropped or not yet known targets)


@dataclass(frozen=True)
class Recipe:
    gpus: tuple[GpuProof, ...]
    toolkit: str
    toolkit_given: bool
    arch_specific: bool
    ptx: bool
    targets: tuple[Target, ...]
    builds_with: tuple[str | None, str | None]  # (oldest, newest) CUDA that builds every target
    spellings: dict[str, str]
    notes: tuple[str, ...]
    alternative: tuple[str, ...]  # the targets of the other kind of recipe, for comparison

    @property
    def complete(self) -> bool:
        return all(p.verdict == NATIVE for p in self.gpus)

    @property
    def exit_code(self) -> int:
        """``archgap recipe``'s: 0 when its build runs natively on every GPU, else 1."""
        return EXIT_OK if self.complete else EXIT_GAP


def _sass_candidates(toolkit: str, variants: tuple[str, ...]) -> list[tuple[int, str]]:
    found = []
    for name in targets_of(toolkit) or ():
        match = _SM.match(name)
        if match and match.group(2) in variants:
            found.append((int(match.group(1)), match.group(2)))
    return sorted(found)


def _cover(
    wanted: Sequence[ComputeCapability], candidates: Iterable[tuple[int, str]]
) -> list[tuple[int, str, tuple[ComputeCapability, ...]]]:
    """Greedy set cover: the target that runs on most uncovered GPUs first; ties go to the
    richer variant, then to a target built for exactly one of them, then to the oldest arch of
    the major (sm_100 rather than sm_101, a Jetson Thor target, for a 10.3)."""
    options = list(candidates)
    left = set(wanted)
    chosen = []
    while left:
        scored = [
            (arch, variant, tuple(sorted(cc for cc in left if sass_runs_on(arch, variant, cc))))
            for arch, variant in options
        ]
        scored = [s for s in scored if s[2]]
        if not scored:
            break
        exact = {cc.sm for cc in left}
        best = max(scored, key=lambda s: (len(s[2]), VARIANT_RANK[s[1]], s[0] in exact, -s[0]))
        chosen.append(best)
        left -= set(best[2])
    return chosen


def choose_sass(
    capabilities: Sequence[ComputeCapability], toolkit: str, arch_specific: bool
) -> list[tuple[int, str, tuple[ComputeCapability, ...]]]:
    """The SASS targets of a recipe: arch-specific ones first where asked, plain for the rest."""
    chosen = []
    left = list(capabilities)
    if arch_specific:
        chosen = _cover(left, _sass_candidates(toolkit, ("a", "f")))
        covered = {cc for _a, _v, ccs in chosen for cc in ccs}
        left = [cc for cc in left if cc not in covered]
    chosen += _cover(left, _sass_candidates(toolkit, ("",)))
    return sorted(chosen, key=lambda c: (c[0], c[1]))


def _ptx_arch(sass: Sequence[tuple[int, str, object]], toolkit: str, top: ComputeCapability) -> int:
    """PTX of the newest SASS arch (forward compatibility); with no SASS at all, the newest
    plain target the toolkit has that the GPUs can still JIT (at most the newest GPU's)."""
    if sass:
        return max(arch for arch, _v, _c in sass)
    plain = [a for a, _v in _sass_candidates(toolkit, ("",)) if a <= top.sm]
    return max(plain) if plain else 0


def _runs(
    arch: int, variant: str, capabilities: Sequence[ComputeCapability]
) -> list[ComputeCapability]:
    return [cc for cc in capabilities if sass_runs_on(arch, variant, cc)]


def _labels(gpus: Sequence[GpuTarget], ccs: Iterable[ComputeCapability]) -> tuple[str, ...]:
    wanted = set(ccs)
    return tuple(
        f"{g.label} ({g.compute_capability})" for g in gpus if g.compute_capability in wanted
    )


def _why(kind: EntryKind, arch: int, variant: str, runs_on: Sequence[str]) -> str:
    on = ", ".join(runs_on) or "no GPU of the set"
    cc = ComputeCapability.of_arch(arch)
    if kind == "ptx":
        return f"forward compatibility: the driver JIT-compiles it for any GPU >= {cc}"
    if variant == "a":
        return f"arch-specific, runs only on {cc}: {on}"
    if variant == "f":
        return f"family target, runs on {on}"
    return f"runs on {on}"


def _target(kind: EntryKind, arch: int, variant: str, runs_on: tuple[str, ...]) -> Target:
    name = f"{'compute' if kind == 'ptx' else 'sm'}_{arch}{variant}"
    return Target(
        kind,
        arch,
        variant,
        runs_on,
        first_toolkit_for(name),
        last_toolkit_for(name),
        _why(kind, arch, variant, runs_on),
    )


def _targets(
    gpus: Sequence[GpuTarget], toolkit: str, arch_specific: bool, ptx: bool
) -> tuple[Target, ...]:
    capabilities = sorted({g.compute_capability for g in gpus})
    sass = choose_sass(capabilities, toolkit, arch_specific)
    targets = [
        _target("sass", arch, variant, _labels(gpus, _runs(arch, variant, capabilities)))
        for arch, variant, _ccs in sass
    ]
    if ptx and capabilities:
        arch = _ptx_arch(sass, toolkit, capabilities[-1])
        if arch:
            jits = [cc for cc in capabilities if ptx_jits_on(arch, "", cc)]
            targets.append(_target("ptx", arch, "", _labels(gpus, jits)))
    return tuple(targets)


def as_binary(targets: Iterable[Target]) -> BinaryFacts:
    """A library holding exactly these targets: what the recipe's build produces."""
    entries = tuple(
        KernelEntry(
            kind=t.kind,
            arch=t.arch,
            variant=as_variant(t.variant),
            ptx_isa=None,
            compression="none",
            stored_size=0,
            uncompressed_size=0,
            section=".nv_fatbin",
            offset=0,
            debug=False,
            listed=True,
        )
        for t in targets
    )
    return BinaryFacts("(recipe)", 0, "elf", entries, False)


def _gap_note(cc: ComputeCapability, toolkit: str) -> str | None:
    """Why the toolkit has no SASS for ``cc``: a target it dropped, or one it does not know yet."""
    name = f"sm_{cc.sm}"
    first, last = first_toolkit_for(name), last_toolkit_for(name)
    if last is not None and _newer(toolkit, last):
        return (
            f"CUDA {toolkit} dropped {name} (the last toolkit that builds it is {last}): build "
            f"with CUDA <= {last}, or this GPU gets no code from this build"
        )
    if first is not None and _newer(first, toolkit):
        return f"{name} needs CUDA >= {first}; CUDA {toolkit} cannot build code for {cc}"
    if first is None and last is None:
        return f"no toolkit in kb/toolkits.json builds {name}"
    return None


def _renumbered_notes(gpus: Sequence[GpuTarget]) -> tuple[str, ...]:
    """A GPU named by a number its architecture had in one range of CUDA releases only (Thor:
    10.1 in CUDA 12.8-12.9, 11.0 from CUDA 13.0): which number which toolkit builds."""
    notes = []
    for moved in renumbered():
        old, new = f"sm_{moved.old.replace('.', '')}", f"sm_{moved.new.replace('.', '')}"
        first, last = first_toolkit_for(old), last_toolkit_for(old)
        name = integrated().get(moved.new, moved.new)
        for gpu in gpus:
            cc = str(gpu.compute_capability)
            if cc not in (moved.old, moved.new):
                continue
            notes.append(
                f"{gpu.label} ({cc}): {moved.old} is {name}'s number in CUDA {first}-{last} "
                f"({old}); from CUDA {moved.toolkit} it is {moved.new} ({new}), the number a "
                f"CUDA {moved.toolkit.split('.')[0]} driver reports: build {new} with CUDA >= "
                f"{moved.toolkit} for it ({moved.source})"
            )
    return tuple(notes)


def _newer(a: str, b: str) -> bool:
    return (major_minor(a) or (0, 0)) > (major_minor(b) or (0, 0))


def prove(
    gpus: Sequence[GpuTarget], targets: Sequence[Target], toolkit: str
) -> tuple[GpuProof, ...]:
    """Each GPU's verdict on a library built from the recipe: the recipe's proof."""
    binary = as_binary(targets)
    proofs = []
    for gpu in gpus:
        verdict = library_verdict(binary, gpu)
        note = None if verdict.verdict == NATIVE else _gap_note(gpu.compute_capability, toolkit)
        proofs.append(
            GpuProof(gpu.label, str(gpu.compute_capability), verdict.verdict, verdict.reason, note)
        )
    return tuple(proofs)


def _builds_with(targets: Sequence[Target]) -> tuple[str | None, str | None]:
    firsts = [t.min_toolkit for t in targets if t.min_toolkit]
    lasts = [t.last_toolkit for t in targets if t.last_toolkit]
    oldest = max(firsts, key=lambda v: major_minor(v) or (0, 0)) if firsts else None
    newest = min(lasts, key=lambda v: major_minor(v) or (0, 0)) if lasts else None
    return oldest, newest


def default_toolkit(gpus: Sequence[GpuTarget], arch_specific: bool) -> str:
    """The newest known toolkit that builds native code for every GPU (the newest one if none)."""
    releases = [r.cuda for r in reversed(toolkit_releases())]
    for cuda in releases:
        targets = _targets(gpus, cuda, arch_specific, ptx=False)
        if all(p.verdict == NATIVE for p in prove(gpus, targets, cuda)):
            return cuda
    return releases[0]


def _plain_fallbacks(
    gpus: Sequence[GpuTarget], targets: Sequence[Target], toolkit: str, arch_specific: bool
) -> tuple[str, ...]:
    """Arch-specific recipe: the GPUs (9.0 and newer) the toolkit has no 'a'/'f' target for."""
    if not arch_specific:
        return ()
    notes = []
    for gpu in gpus:
        cc = gpu.compute_capability
        specific = [t for t in targets if t.variant and sass_runs_on(t.arch, t.variant, cc)]
        if specific or cc.major < 9:
            continue
        first = first_toolkit_for(f"sm_{cc.sm}a")
        need = f"sm_{cc.sm}a needs CUDA >= {first}" if first else f"no toolkit knows sm_{cc.sm}a"
        notes.append(
            f"{gpu.label} ({cc}): CUDA {toolkit} has no arch-specific target for it ({need}); "
            "it gets plain SASS, without arch-specific instructions"
        )
    return tuple(notes)


def recipe(
    gpus: Sequence[GpuTarget],
    toolkit: str | None = None,
    arch_specific: bool = False,
    ptx: bool = True,
) -> Recipe:
    """The recipe for ``gpus`` with ``toolkit`` (default: the newest that covers them all)."""
    from archgap.analysis.recipe.spelling import (
        FLASHINFER_MIN_SM,
        explain_notes,
        flashinfer_notes,
        spellings,
    )

    cuda = toolkit or default_toolkit(gpus, arch_specific)
    targets = _targets(gpus, cuda, arch_specific, ptx)
    # FlashInfer's list: arch-specific targets for the GPUs FlashInfer supports (sm75 and newer).
    supported = [g for g in gpus if g.compute_capability.sm >= FLASHINFER_MIN_SM]
    specific = _targets(supported, cuda, True, False)
    other = _targets(gpus, cuda, not arch_specific, ptx)
    return Recipe(
        gpus=prove(gpus, targets, cuda),
        toolkit=cuda,
        toolkit_given=toolkit is not None,
        arch_specific=arch_specific,
        ptx=ptx,
        targets=targets,
        builds_with=_builds_with(targets),
        spellings=spellings(targets, specific, gpus),
        notes=explain_notes(targets, cuda)
        + _plain_fallbacks(gpus, targets, cuda, arch_specific)
        + _renumbered_notes(gpus)
        + flashinfer_notes(specific, gpus),
        alternative=tuple(t.name for t in other),
    )


def gpus_of_fleet(facts: Iterable[ProbeResponse]) -> tuple[GpuTarget, ...]:
    """The distinct GPUs (name, compute capability) that hosts' probe facts report."""
    found: dict[tuple[str, str], GpuTarget] = {}
    for host in facts:
        section = host.section("gpu") or {}
        for gpu in section.get("gpus") or () if isinstance(section, dict) else ():
            cc = ComputeCapability.parse(str(gpu.get("compute_capability", "")))
            name = str(gpu.get("name") or "")
            if cc is None or (name, str(cc)) in found:
                continue
            source = f"probe facts of {host.host or 'a host'}"
            found[(name, str(cc))] = GpuTarget(name or str(cc), cc, "present", source)
    return tuple(found.values())
