"""What `trace` shows: the occurrences outside vendored, example and test trees (unless --all),
with what was left out counted per tree."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from archgap.analysis.trees import aside, left_out_sentence, ranked, relative_path
from archgap.report.table import Cell, Column, Table, markdown_escape, markdown_lines

if TYPE_CHECKING:
    from archgap.probe.facts import TraceFacts


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


def table(facts: TraceFacts) -> Table:
    """One row per occurrence: writes first, as the text shows them."""
    root = facts.roots[0] if len(facts.roots) == 1 else ""
    rows = tuple(
        tuple(
            Cell(t)
            for t in (
                o.kind,
                f"{relative_path(o.path, root)}:{o.line}",
                o.function,
                o.form,
                o.text,
                " / ".join(f"{g.kind} {g.condition}".strip() for g in o.branch),
            )
        )
        for o in facts.occurrences
    )
    columns = (
        Column("kind"),
        Column("where", code=True),
        Column("function", code=True),
        Column("form"),
        Column("code", code=True),
        Column("branch", code=True),
    )
    return Table(columns, rows, keys=0)


def findings(facts: TraceFacts) -> list[str]:
    """Each broad except around a write, with what it hides."""
    root = facts.roots[0] if len(facts.roots) == 1 else ""
    lines = []
    for o in facts.occurrences:
        for swallow in o.swallowed:
            hidden = "; ".join(
                f"{r.exception}({r.message!r}) raised at {relative_path(r.path, root)}:{r.line}"
                for r in swallow.raisers
            )
            where = f"{relative_path(o.path, root)}:{o.line}"
            lines.append(
                f"the write at {where} sits in a try whose {swallow.handler!r} (line "
                f"{swallow.except_line}) only does {swallow.action!r}"
                + (f"; it hides {hidden}" if hidden else "")
            )
    return list(dict.fromkeys(lines))


def markdown(facts: TraceFacts, left: LeftOut) -> str:
    from archgap import __version__

    writes = sum(o.kind == "write" for o in facts.occurrences)
    lines = [
        f"### archgap trace {markdown_escape(facts.name)}",
        "",
        f"archgap {__version__}; {writes} writes, {len(facts.occurrences) - writes} reads "
        f"({facts.files_scanned} .py files scanned)",
        "",
        *markdown_lines(table(facts)),
    ]
    notes = findings(facts)
    if notes:
        lines += ["", "#### Swallowed exceptions", "", *(f"- {markdown_escape(n)}" for n in notes)]
    if left.occurrences:
        lines += ["", markdown_escape(left_out_text(left))]
    return "\n".join(lines) + "\n"
