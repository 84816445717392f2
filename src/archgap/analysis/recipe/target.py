"""One target of a recipe: SASS or PTX of an architecture, the GPUs it runs on and the toolkits
that accept it (recipe.py chooses them, spelling.py spells them)."""

from __future__ import annotations

from dataclasses import dataclass

from archgap.analysis.verdicts.compat import target_name
from archgap.probe.facts import EntryKind


@dataclass(frozen=True)
class Target:
    kind: EntryKind  # "sass" or "ptx"
    arch: int
    variant: str  # "", "a", "f"
    runs_on: tuple[str, ...]  # labels of the GPUs of the set it runs on (PTX: JIT-compiles for)
    min_toolkit: str | None  # the first CUDA whose nvcc accepts it
    last_toolkit: str | None  # the last CUDA that accepts it, when a newer one dropped it
    why: str

    @property
    def name(self) -> str:
        return target_name(self.kind, self.arch, self.variant)
