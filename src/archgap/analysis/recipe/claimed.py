"""The CI gate against what a build claims (``kernels PATH... --require claimed``): pure.

Each claimed target is a promise about the GPUs the build serves, checked on every kernel library
(as ``--require GPU``: files of other roles are not judged) with NVIDIA's rules (verdicts/compat):
- SASS ``sm_XY`` claims compute capability X.Y: the library must run there natively, or through
  PTX the driver JIT-compiles (not with ``strict``) — what ``--require X.Y`` judges. ``sm_XYf``
  claims each member of its family from X.Y; ``sm_XYa`` X.Y alone.
- PTX ``compute_XY`` claims forward compatibility: the library must carry PTX that JIT-compiles
  for X.Y (``compute_XY`` or an older virtual architecture; ``a``/``f`` PTX only where its SASS
  would run). SASS does not keep that promise: a GPU newer than the build has no use for it.
- A GPU named in ``[tool.archgap] require``: as ``--require GPU``.
No file with device code at all fails every claim.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from archgap.analysis.recipe.gate import GateFailure, GateResult
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
    NATIVE,
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
    """The GPUs (names or compute capabilities) the claims make the gate judge."""
    return list(dict.fromkeys(g.label for c in claims.claims for g in claimed_gpus(c)))


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
    if verdict.verdict == NATIVE or (verdict.verdict == JIT and not strict):
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
    """Every kernel library against every claimed target."""
    libraries = [b for b in binaries if has_device_code(b)]
    # as in scan, only kernel libraries count: a kernel-less stub has nothing to load
    kernel_libraries = [b for b in libraries if role_of(b)[0] == KERNEL_LIBRARY]
    misplaced = _misplaced(kernel_libraries)
    failures: list[GateFailure] = []
    labels: list[str] = []
    every: dict[str, GpuTarget] = {}
    for claim in claims.claims:
        for gpu in claimed_gpus(claim):
            every.setdefault(str(gpu.compute_capability), gpu)
            cc = str(gpu.compute_capability)
            labels.append(claim.target if claim.kind == GPU else f"{claim.target} ({cc})")
            expected = (claim.target,)
            if not libraries:
                why = "no file with device code in the given paths"
                failures.append(GateFailure("", gpu.label, cc, NONE, why, expected, claim.target))
            for binary in kernel_libraries:
                gap = (NONE, misplaced[binary.path]) if binary.path in misplaced else None
                gap = gap or _gap(binary, claim, gpu, strict)
                if gap is not None:
                    failures.append(
                        GateFailure(binary.path, gpu.label, cc, *gap, expected, claim.target)
                    )
    wanted = recipe(list(every.values()))
    return GateResult(
        tuple(dict.fromkeys(labels)),
        strict,
        len(libraries),
        tuple(failures),
        wanted.spellings["TORCH_CUDA_ARCH_LIST"],
        wanted.spellings["nvcc"],
        tuple(c.target for c in claims.claims),
        claims.describe(),
    )
