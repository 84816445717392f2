"""What `trace` shows: the occurrences outside vendored, example and test trees (unless --all),
with what was left out counted per tree."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from archgap.analysis.trees import aside, left_out_sentence, ranked, relative_path

if TYPE_CHECKING:
    from archgap.probe.source import TraceFacts


@dataclass(frozen=True)
class LeftOut:
    occurrences: int
    files: int
    trees: tuple[tuple[str, str, int], ...]  # (kind, tree path, occurrences), most first


def select(facts: TraceFacts, show_all: bool) -> tuple[TraceFacts, LeftOut]:
    """The facts without the occurrences in aside trees (all of them with ``show_all``)."""
    root = facts.roots[0] if len(facts.roots) == 1 else ""
    counts: dict[tuple[str, str], int] = {}
    files: set[str] = set()
    kept = []
    for occurrence in facts.occurrences:
        tree = None if show_all else aside(relative_path(occurrence.path, root))
        if tree is None:
            kept.append(occurrence)
        else:
            counts[tree] = counts.get(tree, 0) + 1
            files.add(occurrence.path)
    left = LeftOut(sum(counts.values()), len(files), ranked(counts))
    return replace(facts, occurrences=tuple(kept)), left


def left_out_text(left: LeftOut) -> str:
    return left_out_sentence(left.occurrences, f"occurrences in {left.files} files", left.trees)
