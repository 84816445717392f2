"""The verdicts of a package's released versions on the GPUs named (built by
``archgap.index.versions``, which reads the wheels). Pure.

A variant *covers* a GPU when its kernels run there: ``native``, ``jit`` (PTX the driver compiles
at load), and ``partial`` unless ``strict`` (as ``scan`` counts gaps). ``no-kernels`` does not
cover: a variant without device code (a ``+cpu`` build, a placeholder wheel) runs nothing on the
GPU, and recommending it would be wrong. ``unknown`` does not cover: nothing was decided.
"""

from __future__ import annotations

from dataclasses import dataclass

from archgap.analysis.compat import GpuTarget
from archgap.analysis.verdicts import JIT, NATIVE, PARTIAL, UNKNOWN


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


def covers(verdict: str, strict: bool) -> bool:
    return verdict in (NATIVE, JIT) or (verdict == PARTIAL and not strict)
