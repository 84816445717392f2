"""The fixes as a diagnosis shows them: one suggestion each, and the cases of a conditional cause.

Pure: fix-engine fixes (``analysis.fixes.engine``) in, ``FixSuggestion``s in the engine's ranking
out (as scan and fix show them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from archgap.analysis.fixes.engine import AVOID, Fix, ranked


@dataclass(frozen=True)
class FixSuggestion:
    kind: str  # env < toolkit < upgrade < patch
    text: str
    source: str


@dataclass(frozen=True)
class CaseAnswer:
    """One case of a conditional cause: the value of the deciding fact, its cause and fixes."""

    when: str  # "if nvcc is CUDA > 12.9"
    cause: str
    fixes: tuple[str, ...]


def suggestions(fixes: Sequence[Fix], source: str) -> tuple[FixSuggestion, ...]:
    """Fix-engine fixes as the diagnosis shows them, in the engine's ranking (as scan and fix
    show them)."""
    out: dict[str, FixSuggestion] = {}
    for fix in ranked(fixes):
        kind = "env" if fix.kind in (AVOID, "") else fix.kind
        text = fix.action + (f": {fix.command}" if fix.command else "")
        why = f"{fix.tradeoff} ({source})" if fix.tradeoff else source
        out.setdefault(f"{kind}:{text}", FixSuggestion(kind, text, why))
    return tuple(out.values())
