"""The fleet as one self-contained HTML page: a group x package heat map, groups, drift, gaps.

No script, no external stylesheet or font: the page opens from a file or an e-mail attachment.
Every value is escaped (host names and package names come from the machines probed).

It stays readable at thousands of hosts: identical hosts share a fingerprint (which includes
their kernel coverage and JIT outcome), so the heat map has one compact row per group, with the
group's hosts in Slurm's hostlist form (cut, whole in the tooltip), then one red row per reason
hosts could not be probed; the columns with a gap come first, so they are on screen however many
packages follow; groups beyond a page are paginated with ``<details>``; gaps and unreachable
hosts are listed once per distinct reason with the hosts that share it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from archgap import __version__

COLOURS = {
    "native": ("#1a7f37", "#ffffff"),
    "jit": ("#d4a72c", "#1f2328"),
    "partial": ("#e16f24", "#ffffff"),
    "none": ("#cf222e", "#ffffff"),
    "blocked": ("#a40e26", "#ffffff"),
    "unknown": ("#8250df", "#ffffff"),
    "ok": ("#1a7f37", "#ffffff"),
    "fails": ("#cf222e", "#ffffff"),
    "no-kernels": ("#d0d7de", "#1f2328"),
    "": ("#eaeef2", "#57606a"),
}
LEGEND = {
    "native": "native kernels",
    "jit": "PTX only (JIT at load)",
    "partial": "some libraries lack it",
    "none": "no kernels for this GPU (another build)",
    "blocked": "cannot load here (a driver, library, platform or companion missing)",
    "unknown": "unknown",
    "no-kernels": "no kernel library (archives, profilers, stubs)",
    "ok": "JIT builds",
    "fails": "JIT fails",
    "": "not installed",
}
PAGE = 50  # heat map rows (groups) per page
HOSTS_SHOWN = 160  # characters of a group's host list shown before it is cut
HEAT_HOSTS_SHOWN = 40  # the same in the heat map, where a row is one line
# Heat-map columns in this order of their worst cell: gaps, then doubts, then the rest.
COLUMN_RANK = {"none": 0, "blocked": 0, "fails": 0, "partial": 0, "unknown": 1}

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1f2328}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.meta{color:#57606a}.ok{color:#1a7f37}.bad{color:#cf222e}
table{border-collapse:collapse}td,th{padding:4px 8px;border:1px solid #d0d7de;text-align:left;
  vertical-align:top}
th{background:#f6f8fa}.heat td.v{text-align:center;font-weight:600;min-width:56px}
.heat th.p{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;
  vertical-align:bottom}
.heat th.j{background:#fff8c5}.hosts{min-width:160px;max-width:420px;overflow-wrap:anywhere}
.heat td,.heat th{padding:2px 6px;white-space:nowrap}.heat td.v{min-width:44px}
.heat .hosts{min-width:0;max-width:300px;overflow:hidden;text-overflow:ellipsis}
.heat td.failed{background:#cf222e;color:#ffffff;font-weight:600}
#verdict{overflow-wrap:anywhere}
.legend span{display:inline-block;padding:2px 8px;margin-right:6px;border-radius:3px}
details{margin:6px 0}summary{cursor:pointer;color:#0969da}
code{background:#f6f8fa;padding:1px 4px;border-radius:3px}
"""


def _cell(verdict: str, title: str = "") -> str:
    background, colour = COLOURS.get(verdict, COLOURS["unknown"])
    label = verdict or "–"
    hint = title or LEGEND.get(verdict, verdict)
    return (
        f'<td class="v" style="background:{background};color:{colour}" title="{escape(hint)}">'
        f"{escape(label)}</td>"
    )


def _table_head(title: str, columns: tuple[str, ...], table_id: str = "") -> str:
    """A section heading and the opening of its table, up to its header row."""
    attribute = f' id="{table_id}"' if table_id else ""
    header = "".join(f"<th>{column}</th>" for column in columns)
    return f"<h2>{title}</h2><table{attribute}><tr>{header}</tr>"


def _hosts(names: tuple[str, ...] | list[str], shown: int = HOSTS_SHOWN) -> str:
    """A host list in hostlist form, cut with the whole list in the tooltip."""
    from archgap.analysis.fleet import compress_hosts

    text = compress_hosts(names)
    if len(text) <= shown:
        return escape(text)
    return f'<span title="{escape(text)}">{escape(text[:shown])}… ({len(names)})</span>'


def _heatmap(report: Any) -> list[str]:
    from archgap.analysis.fleet import coverage_matrix, jit_packages

    packages, _ = coverage_matrix(report)
    jit = jit_packages(report)
    if not packages and not jit and not report.unreachable:
        return [
            '<p class="meta" id="heatmap">No host reported packages with CUDA device code or a '
            "JIT finding for a present or named GPU.</p>"
        ]
    columns = _heat_columns(report, packages, jit)
    head = ["<tr><th>group</th><th>hosts</th><th>GPUs</th>"]
    head += [
        f'<th class="p j" title="JIT compiler">{escape(p)} (JIT)</th>'
        if is_jit
        else f'<th class="p">{escape(p)}</th>'
        for p, is_jit, _, _ in columns
    ]
    head.append("</tr>")
    return ['<div id="heatmap">', *_paged(head, _heat_rows(report, columns)), "</div>"]


_Column = tuple[str, bool, list[str], list[str]]  # package, JIT, a cell and a tooltip per group


def _heat_columns(report: Any, packages: Sequence[str], jit: Sequence[str]) -> list[_Column]:
    """Every column's cells (one per group) and their tooltips, kernels then JIT, the worst
    first."""
    from archgap.analysis.fleet import jit_cells, kernel_cells

    groups = [g.summary for g in report.groups]
    kernels = [kernel_cells(g, packages) for g in groups]
    columns = [
        (p, False, [k[i] for k in kernels], [""] * len(groups)) for i, p in enumerate(packages)
    ]
    statuses = [jit_cells(g, jit) for g in groups]
    causes = [{j.package: f"{j.status}: {j.cause}" for j in g.jit_findings} for g in groups]
    columns += [
        (p, True, [s[i] for s in statuses], [c.get(p, "") for c in causes])
        for i, p in enumerate(jit)
    ]
    columns.sort(key=lambda c: min((COLUMN_RANK.get(v, 2) for v in c[2]), default=2))
    return columns


def _heat_rows(report: Any, columns: list[_Column]) -> list[str]:
    """A row per group, then one per reason hosts were not probed."""
    letters = report.group_letters
    rows = []
    for index, group in enumerate(report.groups):
        row = [
            f"<tr><th>{escape(letters[group.fingerprint])}</th>",
            f'<td class="hosts">{len(group.hosts)}: {_hosts(group.hosts, HEAT_HOSTS_SHOWN)}</td>',
            f"<td>{escape(', '.join(group.summary.gpus) or 'none')}</td>",
        ]
        row += [_cell(values[index], hints[index]) for _, _, values, hints in columns]
        row.append("</tr>")
        rows.append("".join(row))
    for kind, hosts in _by_kind(report).items():
        rows.append(
            f'<tr><th class="bad">✗</th><td class="hosts">{len(hosts)}: '
            f"{_hosts([u.name for u in hosts], HEAT_HOSTS_SHOWN)}</td>"
            f'<td class="failed" colspan="{1 + len(columns)}" title="{escape(hosts[0].message)}">'
            f"not probed: {escape(kind)}</td></tr>"
        )
    return rows


def _paged(head: list[str], rows: list[str]) -> list[str]:
    """The table, or over PAGE rows one table per page, each folded but the first."""
    parts: list[str] = []
    for start in range(0, len(rows), PAGE):
        table = ['<table class="heat">', *head, *rows[start : start + PAGE], "</table>"]
        if len(rows) <= PAGE:
            parts += table
            continue
        is_open = " open" if start == 0 else ""
        last = min(start + PAGE, len(rows))
        summary = f"groups {start + 1}–{last} of {len(rows)}"
        parts.append(f"<details{is_open}><summary>{summary}</summary>")
        parts += [*table, "</details>"]
    return parts


def _by_kind(report: Any) -> dict[str, list[Any]]:
    """The hosts that were not probed, by why."""
    by_kind: dict[str, list[Any]] = {}
    for u in report.unreachable:
        by_kind.setdefault(u.kind, []).append(u)
    return by_kind


def _table(title: str, columns: tuple[str, ...], table_id: str, rows: Iterable[str]) -> list[str]:
    """A section: its heading, a table with a header row, the rows (already HTML)."""
    return [_table_head(title, columns, table_id), *rows, "</table>"]


def _groups(report: Any) -> list[str]:
    letters = report.group_letters
    rows = []
    for group in report.groups:
        s = group.summary
        rows.append(
            f"<tr><td>{escape(letters[group.fingerprint])}</td>"
            f'<td class="hosts">{len(group.hosts)}: {_hosts(group.hosts)}</td>'
            f"<td>{escape(', '.join(s.gpus) or 'none')}</td>"
            f"<td>{escape(s.driver or 'none')}</td><td>{escape(', '.join(s.toolkits) or '–')}</td>"
            f"<td>{escape(s.python)}</td><td>{len(s.packages)}</td></tr>"
        )
    columns = ("group", "hosts", "GPUs", "driver", "toolkits", "python", "packages")
    return _table("Groups of identical hosts", columns, "groups", rows)


def _drift(report: Any) -> list[str]:
    baseline = report.baseline
    if not report.drift or baseline is None:
        return []
    letters = report.group_letters
    base = letters[baseline.fingerprint]
    rows = [
        f"<tr><td>{escape(letters[d.group])}</td><td>{escape(d.field)}</td>"
        f"<td>{'<br>'.join(escape(v) for v in d.added)}</td>"
        f"<td>{'<br>'.join(escape(v) for v in d.removed)}</td></tr>"
        for d in report.drift
    ]
    title = f"Drift against group {escape(base)} (the largest, {len(baseline.hosts)} hosts)"
    columns = ("group", "what", "only in the group (+)", f"only in {escape(base)} (−)")
    return _table(title, columns, "drift", rows)


def _grouped_lists(report: Any) -> list[str]:
    parts: list[str] = []
    by_gap = report.hosts_by("gaps")
    if by_gap:
        rows = [
            f'<tr><td class="hosts">{len(names)}: {_hosts(names)}</td><td>{escape(gap)}</td></tr>'
            for gap, names in by_gap.items()
        ]
        parts += _table("Gaps", ("hosts", "gap"), "gaps", rows)
    by_kind = _by_kind(report)
    if by_kind:
        rows = []
        for kind, hosts in by_kind.items():
            example = hosts[0].message + (" (first of these)" if len(hosts) > 1 else "")
            rows.append(
                f'<tr><td class="bad">{escape(kind)}</td>'
                f'<td class="hosts">{len(hosts)}: {_hosts([u.name for u in hosts])}</td>'
                f"<td>{escape(example)}</td></tr>"
            )
        parts += _table("Not probed", ("why", "hosts", "message"), "unreachable", rows)
    return parts


def fleet_html(report: Any, headline: str) -> str:
    """The page; ``headline`` says what was read ("3/4 hosts answered in 0.8 s · ...")."""
    answered, dead = len(report.hosts), len(report.unreachable)
    gap_hosts = report.gap_hosts
    legend = "".join(
        f'<span style="background:{COLOURS[v][0]};color:{COLOURS[v][1]}">{escape(v or "–")}: '
        f"{escape(text)}</span>"
        for v, text in LEGEND.items()
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        f"<title>archgap fleet: {answered + dead} hosts</title><style>{STYLE}</style></head><body>",
        "<h1>archgap fleet report</h1>",
        f'<p class="meta">{escape(headline)} · archgap {escape(__version__)}</p>',
        f'<p class="{"bad" if gap_hosts else "ok"}" id="verdict"><strong>'
        + (
            f"{len(gap_hosts)} host(s) with a gap: {_hosts(gap_hosts)}"
            if gap_hosts
            else "No gap on any host that answered."
        )
        + "</strong></p>",
        "<h2>Kernel and JIT coverage (one row per group of identical hosts)</h2>",
        f'<p class="legend">{legend}</p>',
        *_heatmap(report),
        *_groups(report),
        *_drift(report),
        *_grouped_lists(report),
        "</body></html>\n",
    ]
    return "\n".join(parts)
