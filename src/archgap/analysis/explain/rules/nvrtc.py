"""NVRTC: the run-time compiler a package (CuPy, numba, JAX ...) compiles with, of its own CUDA;
an -arch it rejected for a GPU the log does not name; CuPy's kernels with no image for the GPU."""

from __future__ import annotations

import re

from archgap.analysis.explain.causes import HOW_CC
from archgap.analysis.explain.rules.facts import CONDITIONAL, DETERMINED, Case, LogFacts, Ruling
from archgap.analysis.explain.rules.words import gpu_words, major_of, release_after, version_of
from archgap.analysis.fixes.engine import TOOLKIT, UPGRADE, Fix, worded
from archgap.kb import toolchain as kb
from archgap.kb.load import install_names

# The packages that compile with an NVRTC of their own choosing (the system's, or a wheel's).
_NVRTC_USERS = frozenset(("cupy", "numba", "numba-cuda", "jax", "cuda-python", "warp-lang"))


def nvrtc_cuda(facts: LogFacts) -> str | None:
    """The CUDA of the NVRTC that ran: where torch is the only NVRTC user the log names, its
    build's (a torch wheel loads the NVRTC of its own CUDA, nvidia-cuda-nvrtc-cuXX or bundled,
    whatever toolkit the system has), else the toolkit the log states."""
    others = _NVRTC_USERS & set(facts.stated.get("package", ()))
    return facts.torch_cuda if facts.torch_cuda and not others else facts.toolkit


def nvrtc_without_gpu(facts: LogFacts) -> Ruling:
    """NVRTC rejected an -arch the log does not show, for a GPU it does not name: the answer
    depends on the GPU, against the targets of the NVRTC's CUDA."""
    have = nvrtc_cuda(facts)
    targets = sorted(kb.targets_of(have) or () if have else (), key=_number)
    plain = [t for t in targets if t[-1].isdigit()]
    fix = worded("nvrtc-package-build", kind=TOOLKIT, how_cc=HOW_CC)
    decide = (f"the GPU's compute capability: {HOW_CC}",)
    if have and plain:
        cause = f"the NVRTC of CUDA {have} rejected the GPU's architecture"
        oldest, newest = plain[0], plain[-1]
        # a GPU older than what this CUDA builds: the last CUDA that built the target below
        below = max(
            (t for t in _every_target() if _number(t) < _number(oldest)), key=_number, default=""
        )
        last = (kb.last_toolkit_for(below) if below else None) or "an older"
        cases = (
            Case(
                f"if the GPU is older than {oldest}",
                f"CUDA {have} no longer builds it (a newer CUDA dropped it)",
                (nvrtc_fix(True, below or oldest, last, None, facts),),
            ),
            Case(
                f"if the GPU is newer than {newest}",
                f"CUDA {have} predates it: it needs a newer CUDA",
                (nvrtc_fix(False, newest, None, release_after(have), facts),),
            ),
        )
        return Ruling("toolkit-target", cause, CONDITIONAL, (fix,), decide, cases)
    cause = (
        "NVRTC rejected the GPU's architecture: its CUDA is either older than the GPU or "
        "newer than a release that dropped it"
    )
    return Ruling("toolkit-target", cause, CONDITIONAL, (fix,), decide)


def _number(target: str) -> int:
    return int(re.sub(r"\D", "", target))


def _every_target() -> frozenset[str]:
    """Every plain ``sm_*`` target a known toolkit release ever built."""
    return frozenset(t for r in kb.toolkit_releases() for t in r.targets_added if t[-1].isdigit())


def nvrtc_fix(
    newer: bool, target: str, last: str | None, first: str | None, facts: LogFacts
) -> Fix:
    """The NVRTC to use: the last CUDA that builds a dropped target, or one new enough; the
    package's build of that CUDA named where the log names the package (CuPy's wheel, torch)."""
    if newer:
        return worded(
            "nvrtc-last-cuda", kind=TOOLKIT, last=last, target=target,
            example=_build_of(facts, last, "{} with a CUDA {} runtime"),
        )  # fmt: skip
    return worded(
        "nvrtc-first-cuda", kind=TOOLKIT, first=first, example=_build_of(facts, first, "{}")
    )


def _build_of(facts: LogFacts, cuda: str | None, words: str) -> str:
    """ " (e.g. cupy-cuda11x)" or " (e.g. a torch built with CUDA 11.8)" where the log names
    CuPy or torch, whose NVRTC is that of their CUDA; "" where it names neither."""
    if facts.names("cupy"):
        return f" (e.g. {words.format(_cupy_package(cuda), cuda)})"
    if facts.names("torch"):
        return f" (e.g. a torch built with CUDA {cuda}: torch.version.cuda)"
    return ""


def _cupy_package(cuda: str | None) -> str:
    """CuPy's wheel for a CUDA: one per minor before CUDA 11 (cupy-cuda102), then one per major
    (cupy-cuda11x, cupy-cuda12x): https://docs.cupy.dev/en/stable/install.html"""
    return install_names().cupy(cuda)


def _cupy_at_least(cuda: str) -> str:
    """CuPy's wheel for CUDA >= ``cuda``: its per-major wheel, the first one where older."""
    names = install_names()
    return names.cupy_per_major.format(major=max(major_of(cuda), names.cupy_per_major_from))


def cupy_compiles(facts: LogFacts) -> Ruling | None:
    """CuPy compiles its kernels at run time with NVRTC (cupy/cuda/compiler.py) and loads them
    through the driver: a kernel with no image for the GPU (CUDA_ERROR_NO_BINARY_FOR_GPU,
    'device kernel image is invalid') means the NVRTC of its CUDA, or the CuPy that picks the
    target, predates the GPU."""
    cc = facts.ccs[0]
    target = f"sm_{cc.replace('.', '')}"
    first = kb.first_toolkit_for(target)
    if first is None:
        return None
    have = facts.toolkit
    if have and version_of(have) >= version_of(first):
        why = f"the NVRTC of CUDA {have} builds it, so the CuPy release predates {cc}"
    else:
        why = f"{target} needs an NVRTC from CUDA >= {first} and a CuPy release that knows {cc}"
    cause = (
        f"CuPy compiles its kernels at run time with NVRTC, and the kernel it loaded has no "
        f"image for {target}{gpu_words(facts)}: {why}"
    )
    fix = worded(
        "nvrtc-cupy-release", kind=UPGRADE, cc=cc, first=first, cupy_wheel=_cupy_at_least(first)
    )
    return Ruling("nvrtc-target", cause, DETERMINED, (fix,))
