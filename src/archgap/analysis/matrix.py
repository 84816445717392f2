"""A compatibility matrix (``archgap matrix``): for each package, its last releases x variants x
GPUs, each cell a verdict with what decided it and what re-derives it. Pure: the wheels are read
and judged by ``orchestrate.matrix``; this module turns a judged wheel into cells.

A cell is the verdict ``versions`` gives the variant on that GPU (``analysis.versions``), with the
library whose entry decided it (the first kernel library of that verdict; for ``partial``, the
first without code for the GPU), and for ``jit`` what must compile it: the driver (PTX in the
wheel) or a CUDA toolkit's nvcc (a package that builds its kernels at first use, by its JIT
model). Every cell names its wheel's file name, sha256 and member, so it can be re-derived
with ``archgap scan WHEEL --gpu GPU``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from archgap.analysis.fixes.engine import normalised_target
from archgap.analysis.verdicts.compat import GpuTarget
from archgap.analysis.verdicts.platform import ANY_GPU, PlatformFinding
from archgap.analysis.verdicts.verdicts import (
    BLOCKED,
    JIT,
    KERNEL_LIBRARY,
    NONE,
    PARTIAL,
    LibraryVerdict,
)
from archgap.kb import toolchain as kb


@dataclass(frozen=True)
class Cell:
    gpu: str  # the GpuTarget label
    compute_capability: str
    verdict: str  # native, jit, partial, blocked, none, unknown, no-kernels
    reason: str  # one sentence: why, naming the deciding entry
    entry: str | None  # the deciding entry: "sm_90 SASS in .nv_fatbin", or the JIT model
    member: str | None  # the wheel member holding it: "demo/libmix.so"
    needs: str | None = None  # jit: what compiles it ("the driver: compute_80 PTX", "nvcc ...")


@dataclass(frozen=True)
class Variant:
    """One wheel of a release: its cells, one per GPU, and what re-derives them."""

    version: str  # with its local label: 3.0+cu130
    index: str
    wheel: str  # the file name
    url: str
    sha256: str | None  # from the index; None: the wheel is read on every run
    cells: tuple[Cell, ...]  # one per GPU; empty when the wheel could not be read
    problem: str | None = None  # why it could not be read
    cached: bool = False  # its cells came from the matrix cache (nothing fetched)
    platform: str | None = None  # the platform tag it was chosen for (None: this machine's)


@dataclass(frozen=True)
class PackageMatrix:
    package: str
    releases: tuple[str, ...]  # the public versions shown, newest first
    variants: tuple[Variant, ...]  # newest first, then index order
    problem: str | None = None  # why nothing was listed
    index_problems: tuple[str, ...] = ()
    bytes_fetched: int = 0  # what crossed the network for this package's wheels
    wheel_bytes: int = 0  # the full size of the wheels read (what a download would take)


@dataclass(frozen=True)
class MatrixReport:
    gpus: tuple[GpuTarget, ...]
    indexes: tuple[str, ...]
    python_version: str | None
    platforms: tuple[str | None, ...]  # each platform's wheels are variants (None: this one's)
    versions: int  # releases per package
    packages: tuple[PackageMatrix, ...]

    @property
    def bytes_fetched(self) -> int:
        return sum(p.bytes_fetched for p in self.packages)

    @property
    def wheel_bytes(self) -> int:
        return sum(p.wheel_bytes for p in self.packages)

    @property
    def wheels_read(self) -> int:
        return sum(1 for p in self.packages for v in p.variants if not v.cached and v.cells)


def member_of(path: str, label: str) -> str:
    """A binary's path inside its wheel (its path is ``LABEL/MEMBER``)."""
    return path[len(label) + 1 :] if path.startswith(label + "/") else path


def deciding(verdict: str, libraries: tuple[LibraryVerdict, ...]) -> LibraryVerdict | None:
    """The kernel library that decided the package's verdict: the first with that verdict; for
    ``partial`` the first with nothing for the GPU (none or blocked)."""
    kernels = [lib for lib in libraries if lib.role == KERNEL_LIBRARY]
    wanted = (NONE, BLOCKED) if verdict == PARTIAL else (verdict,)
    return next((lib for lib in kernels if lib.verdict in wanted), None)


def jit_needs(package: str, version: str, gpu: GpuTarget, entry: str | None) -> str | None:
    """What compiles a ``jit`` cell's code: the first CUDA whose nvcc builds a target for the GPU
    by the package's JIT model (as ``analysis.versions.jit_verdict`` finds it), else the
    driver, which JIT-compiles the PTX entry at load."""
    rules = kb.jit_rules().flashinfer
    rng = kb.flashinfer_range(version) if package == rules.package else None
    if rng is not None:
        cc = gpu.compute_capability
        for release in kb.toolkit_releases():
            target = normalised_target(rng, cc, release.cuda)
            if target is not None:
                return f"nvcc of CUDA >= {release.cuda} ({target}, at first use)"
    if entry:
        return f"the driver, which JIT-compiles {entry} at load (its PTX ISA must be known to it)"
    return None


def cell(
    package: str,
    version: str,
    gpu: GpuTarget,
    verdict: str,
    reason: str,
    libraries: tuple[LibraryVerdict, ...],
    label: str,
) -> Cell:
    """A judged variant's cell on ``gpu``: ``verdict`` and ``reason`` as ``versions`` decides
    them, the deciding library among ``libraries`` (a JIT model's verdict names none)."""
    lib = deciding(verdict, libraries)
    entry = lib.deciding_entry if lib else None
    member = member_of(lib.path, label) if lib else None
    if lib is None and verdict in (JIT, NONE) and kb.jit_rules().flashinfer.package == package:
        entry = f"JIT model of {package} (kb/jit.json)"
    needs = jit_needs(package, version, gpu, entry if lib else None) if verdict == JIT else None
    return Cell(gpu.label, str(gpu.compute_capability), verdict, reason, entry, member, needs)


def on_platform(found: Cell, findings: Sequence[PlatformFinding]) -> Cell:
    """The cell, ``blocked`` when what is judged cannot run on the GPU's systems at all: a wheel
    whose native files are for another CPU than its file name says (pip installs it by the
    name), or for another CPU than the GPU's host (``analysis.verdicts.platform``); the entry
    that would have served it stays as the evidence."""
    finding = next((f for f in findings if f.gpu in (ANY_GPU, found.gpu)), None)
    if finding is None:
        return found
    return replace(found, verdict=BLOCKED, reason=finding.cause, needs=None)


def releases(versions: list[str], count: int) -> list[str]:
    """The newest ``count`` public versions (``3.0+cu130`` is a variant of 3.0) of ``versions``
    (newest first)."""
    from packaging.version import Version

    found: list[str] = []
    for version in sorted(versions, key=Version, reverse=True):
        public = version.split("+", 1)[0]
        if public not in found:
            found.append(public)
    return found[:count]
