"""The CI gate of a build (``archgap kernels PATH... --require GPU``): pure.

Every built kernel library must run on every required GPU: ``native`` passes, ``none`` and
``blocked`` (a wheel for another CPU) fail, ``jit`` (only PTX) and ``partial`` (a tiny fraction
of its modules serve the GPU) fail with ``strict``; as in ``scan``, files of other roles
(kernel-less stubs, device-link archives, profilers: verdicts.role_of) are not judged. A
failure names the target the recipe for the required GPUs expects (recipe.py: the same rules),
so the fix is the recipe's build line.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from archgap.analysis.recipe.recipe import recipe
from archgap.analysis.verdicts.compat import GpuTarget
from archgap.analysis.verdicts.verdicts import (
    BLOCKED,
    JIT,
    KERNEL_LIBRARY,
    NATIVE,
    NONE,
    PARTIAL,
    has_device_code,
    library_verdict,
)
from archgap.probe.facts import BinaryFacts


@dataclass(frozen=True)
class GateFailure:
    path: str
    gpu: str
    compute_capability: str
    verdict: str
    reason: str
    expected: tuple[str, ...]  # the recipe's SASS targets that run on this GPU
    claim: str = ""  # --require claimed: the claimed target it lacks ("sm_90", "compute_80")


@dataclass(frozen=True)
class GateResult:
    gpus: tuple[str, ...]  # "B300 (10.3)"
    strict: bool
    libraries: int  # files with device code that were checked
    failures: tuple[GateFailure, ...]
    recipe: str  # the recipe's TORCH_CUDA_ARCH_LIST, shown with the failures
    recipe_nvcc: str
    claims: tuple[str, ...] = ()  # --require claimed: the claimed targets ("sm_80", "compute_80")
    claimed_from: str = ""  # where they were read ("TORCH_CUDA_ARCH_LIST (environment): 8.0")

    @property
    def passed(self) -> bool:
        return not self.failures


def gate_fails(verdict: str, strict: bool) -> bool:
    """none and blocked fail; only PTX or a thin share of the modules (partial) fail when strict;
    unknown (unreadable) fails: nothing is proven. The one rule of both gates (--require GPU,
    and a claimed SASS target: claimed.py)."""
    return verdict != NATIVE and (strict or verdict not in (JIT, PARTIAL))


def _fails(
    binary: BinaryFacts, gpu: GpuTarget, misplaced: str | None, strict: bool
) -> tuple[str, str] | None:
    """(outcome, why) where a kernel library fails the gate on ``gpu`` (built for another CPU:
    ``misplaced`` says why, blocked); None where it passes or is no kernel library (as in scan,
    a kernel-less stub has nothing to load)."""
    verdict = library_verdict(binary, gpu)
    if verdict.role != KERNEL_LIBRARY:
        return None
    if misplaced is not None:
        return BLOCKED, misplaced
    if gate_fails(verdict.verdict, strict):
        return verdict.verdict, verdict.reason
    return None


def _misplaced(libraries: list[BinaryFacts]) -> dict[str, str]:
    """path -> why, for each library of a wheel whose file name says it is for another CPU."""
    if not any(".whl/" in b.path for b in libraries):
        return {}
    from archgap.index.wheeltags import strays

    return {b.path: s.reason for b in libraries for s in strays([b])}


def check_build(
    binaries: Iterable[BinaryFacts], gpus: Sequence[GpuTarget], strict: bool = False
) -> GateResult:
    """Each library with device code against each required GPU."""
    libraries = [b for b in binaries if has_device_code(b)]
    wanted = recipe(gpus)
    expected = {
        p.gpu: tuple(
            t.name
            for t in wanted.targets
            if t.kind == "sass" and f"{p.gpu} ({p.compute_capability})" in t.runs_on
        )
        for p in wanted.gpus
    }
    # a library its wheel's file name says is for another CPU loads on no GPU (index.wheeltags)
    misplaced = _misplaced(libraries)
    failures = []
    for gpu in gpus:
        cc = str(gpu.compute_capability)
        if not libraries:
            reason = "no file with device code in the given paths"
            failures.append(GateFailure("", gpu.label, cc, NONE, reason, expected[gpu.label]))
        for binary in libraries:
            failed = _fails(binary, gpu, misplaced.get(binary.path), strict)
            if failed is not None:
                outcome, why = failed
                failures.append(
                    GateFailure(binary.path, gpu.label, cc, outcome, why, expected[gpu.label])
                )
    return GateResult(
        tuple(f"{g.label} ({g.compute_capability})" for g in gpus),
        strict,
        len(libraries),
        tuple(failures),
        wanted.spellings["TORCH_CUDA_ARCH_LIST"],
        wanted.spellings["nvcc"],
    )
