"""`archgap versions`: the released versions and variants of a package, newest first, with their
verdict per GPU, the newest that covers them all and the pip command that installs it; as a
table (text, Markdown, CSV) and as the JSON body."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from archgap.analysis.versions import VersionsReport, VersionVerdict
from archgap.archives.platform import install_note
from archgap.report.markup import escape
from archgap.report.table import (
    VERDICT_STYLE,
    Cell,
    Column,
    Table,
    csv_text,
    markdown_lines,
    text_lines,
)


def index_label(report: VersionsReport, url: str) -> str:
    """ "main" for the first index, "extra N" for the others (their URLs are listed once)."""
    return _index_label(report.indexes, url)


def _index_label(indexes: Sequence[str], url: str) -> str:
    position = list(indexes).index(url) if url in indexes else -1
    return "main" if position == 0 else f"extra {position}"


def decided(variant: VersionVerdict, indexes: Sequence[str]) -> str:
    """One variant's verdict as soon as it is decided: "- 3.0 (main): T4 none: does not cover"."""
    where = f"- {variant.version} ({_index_label(indexes, variant.index)})"
    if variant.problem:
        return f"{where}: unread: {variant.problem}"
    verdicts = ", ".join(f"{g.gpu} {g.verdict}" for g in variant.verdicts)
    return f"{where}: {verdicts}: {'covers' if variant.covers else 'does not cover'}"


def table(report: VersionsReport) -> Table:
    columns = (
        Column("version"),
        Column("index"),
        *(Column(g.label, sub=str(g.compute_capability)) for g in report.gpus),
        Column("covers"),
        Column("wheel", code=True),
    )
    rows = []
    for v in report.versions:
        verdicts = (
            tuple(Cell(g.verdict, VERDICT_STYLE.get(g.verdict, "")) for g in v.verdicts)
            if v.verdicts
            else tuple(Cell("unread", "magenta") for _ in report.gpus)
        )
        covers = Cell("yes", "green") if v.covers else Cell("no", "red")
        rows.append(
            (
                Cell(v.version, "bold" if v is report.winner else ""),
                Cell(index_label(report, v.index), "dim"),
                *verdicts,
                covers,
                Cell(v.wheel, "dim"),
            )
        )
    return Table(columns, tuple(rows), keys=1)


def gpu_names(report: VersionsReport) -> str:
    return ", ".join(f"{g.label} ({g.compute_capability})" for g in report.gpus)


def conclusion(report: VersionsReport) -> list[str]:
    """What the table means, in sentences: the winner and its pip line, or why there is none."""
    target = gpu_names(report)
    if report.problem:
        return [f"No version of {report.package} could be listed: {report.problem}"]
    walked = f"{len(report.versions)} of {report.listed} variant(s) read"
    if report.winner is None:
        if not report.judged:
            return [f"No variant of {report.package} could be judged ({walked})."]
        return [f"No released variant of {report.package} covers {target} ({walked})."]
    winner = report.winner
    lines = [
        f"Newest that covers {target}: {report.package} {winner.version} "
        f"(index {index_label(report, winner.index)}; {walked})",
        f"  $ {report.install}",
    ]
    note = install_note(report.platform)  # --platform win_amd64 on Linux, and the reverse
    if note:
        lines.append(f"  ({note})")
    return lines


def problems(report: VersionsReport) -> list[str]:
    """Indexes skipped (when others listed the project), then wheels that could not be read."""
    skipped = list(report.index_problems) if report.listed else []
    return skipped + [f"{v.version} ({v.wheel}): {v.problem}" for v in report.versions if v.problem]


def reasons(report: VersionsReport) -> list[str]:
    """Why each judged variant got its verdict, one line per variant x GPU."""
    return [
        f"{v.version} on {g.gpu}: {g.verdict} — {g.reason}"
        for v in report.versions
        for g in v.verdicts
    ]


def indexes(report: VersionsReport) -> list[str]:
    return [f"{index_label(report, url)}: {url}" for url in report.indexes]


def markdown(report: VersionsReport) -> str:
    lines = [f"### archgap versions {report.package}", ""]
    lines += [f"- {line}" for line in indexes(report)]
    if report.versions:
        lines += ["", *markdown_lines(table(report))]
    lines += ["", *(line.strip() for line in conclusion(report))]
    return "\n".join(lines) + "\n"


def csv(report: VersionsReport) -> str:
    return csv_text(table(report))


def body(report: VersionsReport, first: bool, seconds: float) -> dict[str, Any]:
    """The JSON document's body (schema: versions.schema.json)."""
    return {
        "package": report.package,
        "gpus": [
            {"label": g.label, "compute_capability": str(g.compute_capability)} for g in report.gpus
        ],
        "indexes": list(report.indexes),
        "python_version": report.python_version,
        "platform": report.platform,
        "strict": report.strict,
        "first": first,
        "listed": report.listed,
        "judged": report.judged,
        "versions": [_version(v) for v in report.versions],
        "winner": _version(report.winner) if report.winner else None,
        "install": report.install,
        "problem": report.problem,
        "index_problems": list(report.index_problems),
        "bytes_fetched": report.bytes_fetched,
        "seconds": round(seconds, 3),
    }


def constraints(report: VersionsReport, first: bool) -> str:
    """A pip (``-c FILE``) / uv (``--constraint FILE``) constraints file: ``NAME!=VERSION`` for
    each version whose every build fails a GPU, with why after ``#``; a version that cannot be
    excluded as a comment (analysis.versions.exclusions)."""
    from archgap.analysis.versions import exclusions

    mode = " (strict: partial fails)" if report.strict else ""
    lines = [
        f"# archgap versions {report.package} --gpu {','.join(g.label for g in report.gpus)}"
        f"{mode}: constraints for pip -c FILE / uv pip -c FILE",
        f"# GPUs: {gpu_names(report)}",
        *(f"# {line}" for line in indexes(report)),
        "# excluded: every version whose builds were read and have nothing for a GPU (none, "
        "blocked, no-kernels)",
    ]
    if report.winner is None:
        lines.append(f"# no variant read covers {gpu_names(report)}: a resolver finds none")
    elif first and len(report.versions) < report.listed:
        lines.append(f"# older than {report.winner.version}: not read (--first), not constrained")
    for found in exclusions(report):
        why = _one_line(found.why)
        if found.excluded:
            lines.append(f"{report.package}!={found.version}  # {why}")
        else:
            lines.append(f"# kept {report.package} {found.version}: {why}")
    return "\n".join(lines) + "\n"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _version(v: VersionVerdict) -> dict[str, Any]:
    return {
        "version": v.version,
        "index": v.index,
        "wheel": v.wheel,
        "url": v.url,
        "covers": v.covers,
        "problem": v.problem,
        "verdicts": [
            {
                "gpu": g.gpu,
                "compute_capability": g.compute_capability,
                "verdict": g.verdict,
                "reason": g.reason,
            }
            for g in v.verdicts
        ],
    }


def text(
    report: VersionsReport,
    elapsed: float,
    width: int | None,
    terminal: bool,
    quiet: bool,
    verbosity: int,
) -> list[str]:
    """The text report: rich-markup lines, the table fitted to ``width`` on a ``terminal``."""
    lines = [f"[bold]Versions[/] of {escape(report.package)} for {gpu_names(report)}"]
    target = [report.python_version and f"Python {report.python_version}", report.platform]
    if any(target):
        lines[0] += f" [dim](wheels for {escape(' on '.join(t for t in target if t))})[/]"
    lines += [f"  [dim]{escape(line)}[/]" for line in indexes(report)]
    if report.versions:
        lines += text_lines(table(report), width, terminal)
    if not quiet:
        lines += [f"[magenta]![/] {escape(line)}" for line in problems(report)]
    if verbosity:
        lines += [f"  [dim]{escape(line)}[/]" for line in reasons(report)]
    style = "green" if report.winner else "bold red"
    ending = conclusion(report)
    lines += ["", f"[{style}]{escape(ending[0])}[/]", *map(escape, ending[1:])]
    lines.append(f"[dim]{report.bytes_fetched:,} bytes fetched in {elapsed:.2f} s[/]")
    return lines
