"""What `gates` shows: the gates outside vendored/example/test trees (unless --all), of the
asked kinds (--kind), with what was left out counted per tree."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from archgap.analysis.trees import left_out_sentence, relative_path
from archgap.report.table import Cell, Column, Table, markdown_escape, markdown_lines

if TYPE_CHECKING:
    from archgap.analysis.source_shown import GateRejection, GatesLeftOut
    from archgap.probe.facts import GatesFacts
    from archgap.results import GatesResult


def rejection_text(rejection: GateRejection) -> str:
    """``rejects RTX PRO 6000 (12.0)``, or ``rejects H100 (9.0) when k_cache.dtype == ...``."""
    if rejection.certain:
        return f"rejects {rejection.gpu}"
    return f"rejects {rejection.gpu} when {' and '.join(rejection.unless)}"


def left_out_text(left: GatesLeftOut) -> str:
    """One sentence: how many gates were left out, from which trees ("" when none)."""
    return left_out_sentence(left.gates, f"gates in {left.functions} functions", left.trees)


def table(facts: GatesFacts) -> Table:
    """One row per gate: where, in which function, what kind, what, under which condition."""
    rows = []
    for target in facts.targets:
        for function in target.functions:
            path = relative_path(function.path, target.label)
            for gate in function.gates:
                rows.append(
                    tuple(
                        Cell(t)
                        for t in (
                            target.label,
                            f"{path}:{gate.line}",
                            function.function,
                            gate.kind,
                            gate.message or gate.detail,
                            gate.condition,
                        )
                    )
                )
    columns = (
        Column("target"),
        Column("where", code=True),
        Column("function", code=True),
        Column("kind"),
        Column("gate"),
        Column("condition", code=True),
    )
    return Table(columns, tuple(rows), keys=0)


def markdown(facts: GatesFacts, left: GatesLeftOut) -> str:
    from archgap import __version__

    lines = ["### archgap gates", "", f"archgap {__version__}", "", *markdown_lines(table(facts))]
    if left.gates:
        lines += ["", markdown_escape(left_out_text(left))]
    return "\n".join(lines) + "\n"


# --- the gates result (api.gates), in each format ----------------------------------------------


def document(result: GatesResult) -> dict[str, Any]:
    """The gates document (``archgap gates --json``)."""
    from archgap.report.jsondoc import document as envelope
    from archgap.report.jsondoc import shown_body

    return envelope("gates", shown_body("gates", result.facts, result.left))


def markdown_of(result: GatesResult) -> str:
    return markdown(result.facts, result.left)


def csv_of(result: GatesResult) -> str:
    from archgap.report.table import csv_text

    return csv_text(table(result.facts))


def text(result: GatesResult) -> list[str]:
    """Rich-markup lines: per target its gates, grouped by file and function, each with its
    line, kind, message and branch condition; what could not be read; what was left out."""
    from archgap.report.markup import escape, short_path

    lines = []
    why: dict[tuple[str, int], list[str]] = {}
    for rejection in result.rejections:
        why.setdefault((rejection.path, rejection.line), []).append(rejection_text(rejection))
    for target in result.facts.targets:
        count = sum(len(f.gates) for f in target.functions)
        what = f"gates that reject {', '.join(result.gpus)}" if result.gpus else "gates"
        lines.append(
            f"[bold]{escape(target.label)}[/]: {count} {what} in {len(target.functions)} functions "
            f"[dim]({target.files_scanned} .py files, {target.candidate_files} read closely)[/]"
        )
        path = None
        for function in target.functions:
            if function.path != path:
                path = function.path
                lines.append(f"  [cyan]{escape(short_path(function.path, function.module))}[/]")
            lines.append(f"    [bold]{escape(function.function)}[/] [dim](line {function.line})[/]")
            for gate in function.gates:
                detail = gate.message or gate.detail
                lines.append(
                    f"      {gate.line:>5}  [magenta]{gate.kind}[/]  {escape(detail)}"
                    + (f"  [dim]when {escape(gate.condition)}[/]" if gate.condition else "")
                )
                for reason in why.get((function.path, gate.line), ()):
                    lines.append(f"             [bold red]{escape(reason)}[/]")
    for problem in result.facts.problems:
        lines.append(f"[yellow]skipped[/] {escape(problem.subject)}: {escape(problem.reason)}")
    note = left_out_text(result.left)
    return lines + ([f"[dim]{escape(note)}[/]"] if note else [])
