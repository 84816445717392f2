"""The fleet as tables: one row per host (group, GPUs, driver, Python, gaps) and the host x
package coverage (worst verdict per package); as Markdown for an issue and as CSV."""

from __future__ import annotations

from typing import TYPE_CHECKING

from archgap import __version__
from archgap.report.table import Cell, Column, Table, csv_text, markdown_escape, markdown_lines

if TYPE_CHECKING:
    from archgap.analysis.fleet import FleetReport


def hosts_table(report: FleetReport) -> Table:
    letters = report.group_letters
    rows = [
        (
            Cell(h.name),
            Cell(letters.get(h.fingerprint, "")),
            Cell(", ".join(h.gpus) or "none"),
            Cell(h.driver or "none"),
            Cell(h.python),
            Cell(f"{len(h.gaps)} (stale)" if h.stale else str(len(h.gaps))),
        )
        for h in report.hosts
    ]
    rows += [
        (Cell(u.name), Cell(""), Cell(""), Cell(""), Cell(""), Cell(f"not probed: {u.kind}"))
        for u in report.unreachable
    ]
    columns = ("host", "group", "GPUs", "driver", "python", "gaps")
    return Table(tuple(Column(c) for c in columns), tuple(rows), keys=1)


def coverage_table(report: FleetReport) -> Table:
    """Host x package: the worst verdict of the package on the host's GPUs ("" not installed)."""
    from archgap.analysis.fleet import coverage_matrix

    packages, rows = coverage_matrix(report)
    body = tuple((Cell(host), *(Cell(v) for v in verdicts)) for host, verdicts in rows)
    return Table((Column("host"), *(Column(p) for p in packages)), body, keys=1)


def markdown(report: FleetReport, elapsed: float) -> str:
    answered = len(report.hosts)
    total = answered + len(report.unreachable)
    lines = [
        "### archgap fleet",
        "",
        f"- archgap {__version__}",
        f"- {answered}/{total} hosts answered in {elapsed:.1f} s; "
        f"{len(report.groups)} group(s) of identical hosts",
        f"- **{len(report.gap_hosts)} host(s) with a gap**",
        "",
        *markdown_lines(hosts_table(report)),
    ]
    coverage = coverage_table(report)
    if len(coverage.columns) > 1:
        lines += ["", "#### Kernel coverage (worst verdict per package)", ""]
        lines += markdown_lines(coverage)
    letters = report.group_letters
    base = letters[report.baseline.fingerprint] if report.baseline else ""
    drift = [
        f"group {letters[d.group]} against {base}: {d.field} "
        + ", ".join([*(f"+{v}" for v in d.added), *(f"-{v}" for v in d.removed)])
        for d in report.drift
    ]
    gaps = [f"{h.name}: {g}" for h in report.hosts for g in h.gaps]
    unreachable = [f"{u.name}: {u.kind} {u.message}" for u in report.unreachable]
    for title, items in (
        (f"Drift against group {base} (the largest)", drift),
        ("Gaps", gaps),
        ("Not probed", unreachable),
    ):
        if items:
            lines += ["", f"#### {title}", "", *(f"- {markdown_escape(i)}" for i in items)]
    return "\n".join(lines) + "\n"


def summary(report: FleetReport, elapsed: float) -> str:
    """One line for a dashboard."""
    answered = len(report.hosts)
    total = answered + len(report.unreachable)
    return (
        f"archgap fleet: {answered}/{total} hosts answered · {len(report.groups)} group(s) · "
        f"{len(report.gap_hosts)} with a gap · {len(report.unreachable)} not probed · "
        + (
            f"{len(report.duplicate_hosts)} host name(s) claimed more than once · "
            if report.duplicate_hosts
            else ""
        )
        + f"{elapsed:.1f} s\n"
    )


def csv(report: FleetReport, elapsed: float = 0.0) -> str:
    """The coverage matrix with each host's group and gap count."""
    coverage = coverage_table(report)
    letters = report.group_letters
    rows = []
    for host, row in zip(report.hosts, coverage.rows, strict=True):  # one row per host, in order
        rows.append(
            (row[0], Cell(letters.get(host.fingerprint, "")), Cell(str(len(host.gaps))), *row[1:])
        )
    for u in report.unreachable:
        rows.append(
            (
                Cell(u.name),
                Cell(""),
                Cell(f"not probed: {u.kind}"),
                *(Cell("") for _ in coverage.columns[1:]),
            )
        )
    columns = (Column("host"), Column("group"), Column("gaps"), *coverage.columns[1:])
    return csv_text(Table(columns, tuple(rows), keys=1))
