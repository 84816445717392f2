"""The CI gate against what a build claims (``kernels PATH... --require claimed``): pure.

Each claimed target is a promise about the GPUs the build serves, checked on every kernel library
(as ``--require GPU``: files of other roles are not judged) with NVIDIA's rules (verdicts/compat):
- SASS ``sm_XY`` claims compute capability X.Y: the library must run there natively, or through
  PTX the driver JIT-compiles, or serve it with a thin share of its modules (``partial``; neither
  with ``strict``) — what ``--require X.Y`` judges (gate.gate_fails). ``sm_XYf``
  claims each member of its family from X.Y; ``sm_XYa`` X.Y alone.
- PTX ``compute_XY`` claims forward compatibility: the library must carry PTX that JIT-compiles
  for X.Y (``compute_XY`` or an older virtual architecture; ``a``/``f`` PTX only where its SASS
  would run). SASS does not keep that promise: a GPU newer than the build has no use for it.
- A GPU named in ``[tool.archgap] require``: as ``--require GPU``.
No file with device code at all fails every claim.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import replace

from archgap.analysis.recipe.gate import GateFailure, GateResult, gate_fails
from archgap.analysis.recipe.recipe import recipe
from archgap.analysis.verdicts.compat import (
    ComputeCapability,
    GpuTarget,
    resolve_gpu,
    sass_runs_on,
)
from archgap.analysis.verdicts.verdicts import (
    JIT,
    KERNEL_LIBRARY,
    NONE,
    UNKNOWN,
    has_device_code,
    library_verdict,
    role_of,
)
from archgap.claims import GPU, PTX, Claim, Claims
from archgap.kb.gpus import known_capabilities
from archgap.probe.facts import BinaryFacts


def claimed_gpus(claim: Claim) -> tuple[GpuTarget, ...]:
    """The compute capabilities one claim promises, as GPUs to judge."""
    if claim.kind == GPU:
        return (resolve_gpu(claim.name),)
    first = ComputeCapability.of_arch(claim.arch)
    ccs = [first]
    if claim.kind != PTX and claim.variant == "f":
        known = (ComputeCapability.parse(c) for c in known_capabilities())
        ccs = sorted({first, *(c for c in known if c and sass_runs_on(claim.arch, "f", c))})
    source = f"claimed {claim.target}"
    return tuple(GpuTarget(str(cc), cc, "named", source) for cc in ccs)


def judged_names(claims: Claims) -> list[str]:
    """The GPUs (names or compute capabilities) the claims make the gate judge (a variant
    wheel's declaration too)."""
    every = [*claims.claims, *(c for v in claims.variants for c in v.claims)]
    return list(dict.fromkeys(g.label for c in every for g in claimed_gpus(c)))


def _in_wheel(binary: BinaryFacts, wheel: str) -> bool:
    head, sep, _ = binary.path.partition(".whl/")
    return bool(sep) and os.path.normpath(head + ".whl") == os.path.normpath(wheel)


def _ptx_only(binary: BinaryFacts) -> BinaryFacts:
    return replace(binary, entries=tuple(e for e in binary.entries if e.kind == "ptx"))


def _ptx_gap(binary: BinaryFacts, gpu: GpuTarget) -> tuple[str, str] | None:
    """(verdict, why) when the library has no PTX that JIT-compiles for the GPU."""
    verdict = library_verdict(_ptx_only(binary), gpu)
    if verdict.verdict == JIT:
        return None
    if verdict.verdict == UNKNOWN:
        return UNKNOWN, verdict.reason
    ptx = sorted({e.target for e in binary.entries if e.kind == "ptx"})
    has = f"its PTX is {', '.join(ptx)}" if ptx else "it has no PTX"
    return NONE, f"no PTX that JIT-compiles for {gpu.compute_capability}: {has}"


def _gap(binary: BinaryFacts, claim: Claim, gpu: GpuTarget, strict: bool) -> tuple[str, str] | None:
    if claim.kind == PTX:
        return _ptx_gap(binary, gpu)
    verdict = library_verdict(binary, gpu)
    if not gate_fails(verdict.verdict, strict):  # as --require X.Y: partial fails when strict
        return None
    return verdict.verdict, verdict.reason


def _misplaced(libraries: Sequence[BinaryFacts]) -> dict[str, str]:
    """A library its wheel's file name says is for another CPU loads on no GPU (wheeltags)."""
    if not any(".whl/" in b.path for b in libraries):
        return {}
    from archgap.index.wheeltags import strays

    return {b.path: s.reason for b in libraries for s in strays([b])}


def check_claims(
    binaries: Iterable[BinaryFacts], claims: Claims, strict: bool = False
) -> GateResult:
    """Every kernel library against every claimed target; each PEP 817 variant wheel's
    libraries against what its variant.json declares too (a declared architecture its kernels
    do not serve fails, as does a variant wheel with no device code)."""
    libraries = [b for b in binaries if has_device_code(b)]
    # as in scan, only kernel libraries count: a kernel-less stub has nothing to load
    kernel_libraries = [b for b in libraries if role_of(b)[0] == KERNEL_LIBRARY]
    misplaced = _misplaced(kernel_libraries)
    found = _Found(strict, misplaced)
    found.check(claims.claims, kernel_libraries, bool(libraries), "", "the given paths")
    for variant in claims.variants:
        own = [b for b in kernel_libraries if _in_wheel(b, variant.wheel)]
        has_code = any(_in_wheel(b, variant.wheel) for b in libraries)
        found.check(variant.claims, own, has_code, f" (variant {variant.label})", variant.wheel)
    wanted = recipe(list(found.every.values()))
    targets = [c.target for c in claims.claims]
    targets += [f"{c.target} (variant {v.label})" for v in claims.variants for c in v.claims]
    sources = [claims.describe()] if claims.source else []
    return GateResult(
        tuple(dict.fromkeys(found.labels)),
        strict,
        len(libraries),
        tuple(found.failures),
        wanted.spellings["TORCH_CUDA_ARCH_LIST"],
        wanted.spellings["nvcc"],
        tuple(targets),
        "; ".join([*sources, *(v.source for v in claims.variants)]),
    )


class _Found:
    """The failures, labels and GPUs of the claims checked so far."""

    def __init__(self, strict: bool, misplaced: dict[str, str]) -> None:
        self.strict = strict
        self.misplaced = misplaced
        self.failures: list[GateFailure] = []
        self.labels: list[str] = []
        self.every: dict[str, GpuTarget] = {}

    def check(
        self,
        claims: Sequence[Claim],
        libraries: Sequence[BinaryFacts],
        has_code: bool,
        suffix: str,
        where: str,
    ) -> None:
        """``claims`` on ``libraries`` (``has_code``: some file there has device code; the
        ``suffix`` names a variant's claims; ``where`` the paths they come from)."""
        for claim in claims:
            for gpu in claimed_gpus(claim):
                self.every.setdefault(str(gpu.compute_capability), gpu)
                cc = str(gpu.compute_capability)
                label = claim.target if claim.kind == GPU else f"{claim.target} ({cc})"
                self.labels.append(label + suffix)
                expected, target = (claim.target,), claim.target + suffix
                if not has_code:
                    why = f"no file with device code in {where}"
                    path = "" if where == "the given paths" else where
                    self.failures.append(
                        GateFailure(path, gpu.label, cc, NONE, why, expected, target)
                    )
                for binary in libraries:
                    gap = (
                        (NONE, self.misplaced[binary.path])
                        if binary.path in self.misplaced
                        else _gap(binary, claim, gpu, self.strict)
                    )
                    if gap is not None:
                        self.failures.append(
                            GateFailure(binary.path, gpu.label, cc, *gap, expected, target)
                        )
