"""How each build system spells a recipe's targets (pure; the targets come from recipe.py).

- nvcc: ``-gencode arch=compute_XY[v],code=sm_XY[v]`` per SASS target and
  ``-gencode arch=compute_XY,code=compute_XY`` for PTX;
- CMake ``CUDA_ARCHITECTURES``: ``XY[v]-real`` is SASS, ``XY-virtual`` PTX, a bare ``XY`` both;
- PyTorch ``TORCH_CUDA_ARCH_LIST``: ``X.Y[a]``, ``+PTX`` adds the PTX of that entry (and its SASS);
  torch's list of valid values has no ``f`` (torch 2.13 ``_get_cuda_arch_flags``; see
  stack_gates.md), so a family target is spelled as the ``a`` target of each covered GPU;
- FlashInfer ``FLASHINFER_CUDA_ARCH_LIST``: space separated ``X.Y[a|f]``, no ``+PTX``. FlashInfer's
  kernels use arch-specific features (it appends ``a``/``f`` itself when detecting), so it is
  always given the arch-specific recipe.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from archgap.analysis.verdicts.compat import ComputeCapability, GpuTarget, sass_runs_on

if TYPE_CHECKING:
    from archgap.analysis.recipe.target import Target

FLASHINFER_MIN_SM = 75  # "FlashInfer requires GPUs with sm75 or higher" (stack_gates.md)


def _dotted(arch: int, variant: str = "") -> str:
    return f"{ComputeCapability.of_arch(arch)}{variant}"


def nvcc_flags(targets: Sequence[Target]) -> str:
    flags = []
    for t in targets:
        code = f"compute_{t.arch}" if t.kind == "ptx" else f"sm_{t.arch}{t.variant}"
        flags.append(f"-gencode arch=compute_{t.arch}{t.variant},code={code}")
    return " ".join(flags)


def cmake_architectures(targets: Sequence[Target]) -> str:
    real = [f"{t.arch}{t.variant}" for t in targets if t.kind == "sass"]
    virtual = [str(t.arch) for t in targets if t.kind == "ptx"]
    items = [f"{r}" if r in virtual else f"{r}-real" for r in real]
    items += [f"{v}-virtual" for v in virtual if v not in real]
    return ";".join(items)


def torch_arch_list(targets: Sequence[Target], gpus: Sequence[GpuTarget]) -> str:
    items: list[str] = []
    for t in targets:
        if t.kind != "sass":
            continue
        if t.variant == "f":  # no 'f' in torch: the 'a' target of each covered GPU of the set
            covered = sorted(
                {
                    g.compute_capability
                    for g in gpus
                    if sass_runs_on(t.arch, "f", g.compute_capability)
                }
            )
            items += [f"{cc}a" for cc in covered if f"{cc}a" not in items]
        elif _dotted(t.arch, t.variant) not in items:
            items.append(_dotted(t.arch, t.variant))
    for t in targets:
        if t.kind == "ptx":
            plain = _dotted(t.arch)
            if plain in items:
                items[items.index(plain)] = plain + "+PTX"
            else:
                items.append(plain + "+PTX")
    return ";".join(items)


def flashinfer_arch_list(specific: Sequence[Target]) -> str:
    """FlashInfer's list: a plain 9.0+ target is left out (FlashInfer would normalise it to an
    'a'/'f' target the toolkit cannot build, or raise "SM 12.x requires CUDA >= 12.9")."""
    return " ".join(
        _dotted(t.arch, t.variant)
        for t in specific
        if t.kind == "sass" and t.arch >= FLASHINFER_MIN_SM and (t.variant or t.arch < 90)
    )


def flashinfer_notes(specific: Sequence[Target], gpus: Sequence[GpuTarget]) -> tuple[str, ...]:
    """Why a GPU of the set is missing from FLASHINFER_CUDA_ARCH_LIST."""
    notes = []
    listed = [t for t in specific if t.kind == "sass" and t.arch >= FLASHINFER_MIN_SM]
    for gpu in gpus:
        cc = gpu.compute_capability
        runs = [t for t in listed if sass_runs_on(t.arch, t.variant, cc)]
        if cc.sm < FLASHINFER_MIN_SM:
            notes.append(f"FLASHINFER_CUDA_ARCH_LIST: FlashInfer requires sm75 or newer ({cc})")
        elif runs and not any(t.variant or t.arch < 90 for t in runs):
            notes.append(
                f"FLASHINFER_CUDA_ARCH_LIST leaves out {gpu.label} ({cc}): its kernels for 9.0 "
                "and newer need an 'a'/'f' target, which this toolkit cannot build for it"
            )
    return tuple(notes)


def spellings(
    targets: Sequence[Target], specific: Sequence[Target], gpus: Sequence[GpuTarget]
) -> dict[str, str]:
    return {
        "TORCH_CUDA_ARCH_LIST": torch_arch_list(targets, gpus),
        "FLASHINFER_CUDA_ARCH_LIST": flashinfer_arch_list(specific),
        "CMAKE_CUDA_ARCHITECTURES": cmake_architectures(targets),
        "nvcc": nvcc_flags(targets),
    }


def explain_notes(targets: Sequence[Target], toolkit: str) -> tuple[str, ...]:
    notes = [
        "plain sm_XY: no arch-specific instructions; runs on X.Y and every later X.Z "
        "(same major); PTX compute_XY lets the driver JIT-compile for newer GPUs",
        "sm_XYa: every arch-specific feature (wgmma/setmaxnreg on 9.0, tcgen05 on 10.x), "
        "runs only on exactly X.Y; its PTX is not forward compatible",
        "sm_XYf (CUDA >= 12.9): the features a family shares, runs on every member "
        "(10.0f on 10.0 and 10.3, 12.0f on 12.0 and 12.1)",
    ]
    if any(t.variant == "f" for t in targets):
        notes.append(
            "TORCH_CUDA_ARCH_LIST has no 'f': the family target is spelled as each covered "
            "GPU's 'a' target there"
        )
    ptx_only = {t.arch for t in targets if t.kind == "ptx"} - {
        t.arch for t in targets if t.kind == "sass" and t.variant == ""
    }
    if ptx_only:
        notes.append("TORCH_CUDA_ARCH_LIST's '+PTX' also builds that entry's plain SASS")
    dropped = [t for t in targets if t.last_toolkit]
    for t in dropped:
        notes.append(
            f"{t.name}: CUDA after {t.last_toolkit} no longer builds it (CUDA {toolkit} does)"
        )
    return tuple(notes)
