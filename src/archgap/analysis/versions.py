"""The verdicts of a package's released versions on the GPUs named (built by
``archgap.index.versions``, which reads the wheels). Pure.

A variant *covers* a GPU when its kernels run there: ``native``, ``jit`` (PTX the driver compiles
at load), and ``partial`` unless ``strict`` (as ``scan`` counts gaps). ``no-kernels`` does not
cover: a variant without device code (a ``+cpu`` build, a placeholder wheel) runs nothing on the
GPU, and recommending it would be wrong. ``unknown`` does not cover: nothing was decided.

A JIT package (FlashInfer) ships no kernels in its wheel on purpose: it compiles them at first
use, so its wheel is judged by its JIT model instead (``jit_verdict``): ``jit`` when some CUDA
toolkit's nvcc builds code for the GPU by that release's rules, ``none`` when none does.
"""

from __future__ import annotations

from dataclasses import dataclass

from archgap.analysis.fixes.engine import flashinfer_supports, normalised_target
from archgap.analysis.verdicts.compat import GpuTarget
from archgap.analysis.verdicts.verdicts import (
    JIT,
    NATIVE,
    NO_KERNELS,
    NONE,
    PARTIAL,
    UNKNOWN,
    Verdict,
)
from archgap.errors import EXIT_ERROR, EXIT_GAP, EXIT_OK
from archgap.kb import toolchain as kb


@dataclass(frozen=True)
class GpuVerdict:
    gpu: str  # the GpuTarget label
    compute_capability: str
    verdict: str
    reason: str


@dataclass(frozen=True)
class VersionVerdict:
    version: str  # with its local label: 3.0+cu130
    index: str
    wheel: str  # the file name pip would install on the target
    url: str
    verdicts: tuple[GpuVerdict, ...]  # one per named GPU; empty when the wheel was not read
    covers: bool
    problem: str | None = None  # why the wheel could not be judged

    @property
    def judged(self) -> bool:
        return self.problem is None and any(v.verdict != UNKNOWN for v in self.verdicts)


@dataclass(frozen=True)
class VersionsReport:
    package: str
    gpus: tuple[GpuTarget, ...]
    indexes: tuple[str, ...]
    python_version: str | None
    platform: str | None
    strict: bool
    versions: tuple[VersionVerdict, ...]  # judged or tried, newest first
    listed: int  # variants the indexes list for the target (more than judged with --first)
    winner: VersionVerdict | None  # the newest variant that covers every GPU
    install: str | None  # the pip command that installs exactly the winner's wheel
    problem: str | None = None  # why no variant was listed at all
    bytes_fetched: int = 0  # what crossed the network for the wheels read
    index_problems: tuple[str, ...] = ()  # indexes that could not give the project's page

    @property
    def judged(self) -> int:
        return sum(1 for v in self.versions if v.judged)

    @property
    def exit_code(self) -> int:
        """``archgap versions``': 0 a variant covers every GPU (``winner``), 1 none does of
        those judged, 2 none could be judged (nothing listed, or every variant unknown)."""
        if self.winner is not None:
            return EXIT_OK
        return EXIT_GAP if self.judged else EXIT_ERROR


def covers(verdict: str, strict: bool) -> bool:
    return verdict in (NATIVE, JIT) or (verdict == PARTIAL and not strict)


@dataclass(frozen=True)
class Exclusion:
    """One version of a constraints file (``versions --constraints``): ``pkg!=VERSION`` when
    ``excluded``, else only a comment saying why it is kept although a build of it fails."""

    version: str  # as the index lists it: "3.0", "3.0+cu130"
    excluded: bool
    why: str  # one line


def fails(variant: VersionVerdict, strict: bool) -> bool:
    """The variant was read and has nothing for at least one GPU (none, blocked, no-kernels,
    partial with ``strict``); unknown on a GPU decides nothing."""
    return variant.problem is None and any(
        g.verdict != UNKNOWN and not covers(g.verdict, strict) for g in variant.verdicts
    )


def _failing(variant: VersionVerdict, strict: bool) -> str:
    wrong = (g for g in variant.verdicts if g.verdict != UNKNOWN and not covers(g.verdict, strict))
    return "; ".join(f"{g.gpu} ({g.compute_capability}) {g.verdict}: {g.reason}" for g in wrong)


def _public(version: str) -> str:
    return version.split("+", 1)[0]


def exclusions(report: VersionsReport) -> tuple[Exclusion, ...]:
    """What a pip/uv constraints file can exclude, newest first: each version whose every build
    on the indexes was read and fails a GPU. A specifier names a version, not an index nor a
    file, and PEP 440 matches ``!=3.0`` against the public part of 3.0+cu130 too: a version
    that one index's build fails and another's covers, or a public version with a local
    variant that covers, cannot be excluded (``excluded`` False, and why). A variant no GPU
    verdict decided (unread, unknown) is left alone."""
    judged = report.versions
    found = (_exclusion(report, version) for version in dict.fromkeys(v.version for v in judged))
    return tuple(e for e in found if e is not None)


def _exclusion(report: VersionsReport, version: str) -> Exclusion | None:
    """The constraint for ``version``: None when no build of it fails; not excludable when
    another index's build, or a local variant of the same public version, does not fail."""
    judged = report.versions
    builds = [v for v in judged if v.version == version]
    failing = [v for v in builds if fails(v, report.strict)]
    if not failing:
        return None
    first = failing[0]
    why = f"{first.wheel}: {_failing(first, report.strict)}"
    others = [v for v in builds if v not in failing]
    if others:
        return Exclusion(version, False, f"{why}; but the build on {others[0].index} "
                         f"({others[0].wheel}) {_state(others[0])}: a constraint cannot "
                         "tell the two apart (install it by URL)")  # fmt: skip
    local = [
        v for v in judged
        if v.version != version and "+" not in version and _public(v.version) == version
        and not fails(v, report.strict)
    ]  # fmt: skip
    if local:
        return Exclusion(version, False, f"{why}; but !={version} would also exclude "
                         f"{local[0].version}, which {_state(local[0])}")  # fmt: skip
    return Exclusion(version, True, why)


def _state(variant: VersionVerdict) -> str:
    if variant.covers:
        return "covers the GPUs"
    return f"could not be judged ({variant.problem or 'unknown'})"


def variant_verdict(
    package: str, version: str, gpu: GpuTarget, verdict: Verdict, reason: str
) -> tuple[Verdict, str]:
    """A variant's verdict on a GPU: its wheel's, or for a JIT package whose wheel has no
    kernels, its JIT model's."""
    if verdict != NO_KERNELS:
        return verdict, reason
    return jit_verdict(package, version, gpu) or (verdict, reason)


def jit_verdict(package: str, version: str, gpu: GpuTarget) -> tuple[Verdict, str] | None:
    """What a package that compiles its kernels at first use does on the GPU, from its JIT model
    (kb/jit.json): the first CUDA whose nvcc builds a target for it by this release's rules
    (FlashInfer's _normalize_cuda_arch and check_cuda_arch); None for a package without one."""
    rules = kb.jit_rules().flashinfer
    if package != rules.package:
        return None
    cc = gpu.compute_capability
    name = f"FlashInfer {version}"
    if not flashinfer_supports(cc):
        why = f"check_cuda_arch() rejects {cc} whatever the toolkit"
        source = rules.min_compute_capability_source
        return NONE, f"{name} compiles its kernels at first use, but {why} ({source})"
    rng = kb.flashinfer_range(version)
    if rng is None:
        return (
            UNKNOWN,
            f"{name} compiles its kernels at first use; archgap models its rules from "
            f"{rules.first_modelled}",
        )
    for release in kb.toolkit_releases():
        target = normalised_target(rng, cc, release.cuda)
        if target is not None:
            return JIT, (
                f"no kernels in the wheel: {name} compiles them at first use, {target} for {cc} "
                f"with the nvcc of CUDA >= {release.cuda} ({rng.source})"
            )
    why = f"no known CUDA's nvcc builds code for {cc} by its rules"
    return NONE, f"{name} compiles its kernels at first use, but {why} ({rng.source})"
