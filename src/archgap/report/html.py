"""The fleet as one self-contained HTML page: a host x package heat map, groups, drift, gaps.

No script, no external stylesheet or font: the page opens from a file or an e-mail attachment.
Every value is escaped (host names and package names come from the machines probed).
"""

from __future__ import annotations

from html import escape
from typing import Any

from archgap import __version__

COLOURS = {
    "native": ("#1a7f37", "#ffffff"),
    "jit": ("#d4a72c", "#1f2328"),
    "partial": ("#e16f24", "#ffffff"),
    "none": ("#cf222e", "#ffffff"),
    "unknown": ("#8250df", "#ffffff"),
    "": ("#eaeef2", "#57606a"),
}

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1f2328}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.meta{color:#57606a}.ok{color:#1a7f37}.bad{color:#cf222e}
table{border-collapse:collapse}td,th{padding:4px 8px;border:1px solid #d0d7de;text-align:left}
th{background:#f6f8fa}.heat td.v{text-align:center;font-weight:600;min-width:64px}
.heat th.p{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;
  vertical-align:bottom}
.legend span{display:inline-block;padding:2px 8px;margin-right:6px;border-radius:3px}
code{background:#f6f8fa;padding:1px 4px;border-radius:3px}
"""


def _cell(verdict: str) -> str:
    background, colour = COLOURS.get(verdict, COLOURS["unknown"])
    label = verdict or "–"
    title = verdict if verdict else "not installed"
    return (
        f'<td class="v" style="background:{background};color:{colour}" title="{escape(title)}">'
        f"{escape(label)}</td>"
    )


def _table_head(title: str, columns: tuple[str, ...], table_id: str = "") -> str:
    """A section heading and the opening of its table, up to its header row."""
    attribute = f' id="{table_id}"' if table_id else ""
    header = "".join(f"<th>{column}</th>" for column in columns)
    return f"<h2>{title}</h2><table{attribute}><tr>{header}</tr>"


def fleet_html(report: Any, seconds: float) -> str:
    from archgap.analysis.fleet import coverage_matrix

    packages, rows = coverage_matrix(report)
    letters = report.group_letters
    group_of = {h: g.fingerprint for g in report.groups for h in g.hosts}
    answered, dead = len(report.hosts), len(report.unreachable)
    gap_hosts = report.gap_hosts
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        f"<title>archgap fleet: {answered + dead} hosts</title><style>{STYLE}</style></head><body>",
        "<h1>archgap fleet report</h1>",
        f'<p class="meta">{answered} of {answered + dead} hosts answered in {seconds:.1f} s · '
        f"{len(report.groups)} group(s) · archgap {escape(__version__)}</p>",
        f'<p class="{"bad" if gap_hosts else "ok"}" id="verdict"><strong>'
        + (
            f"{len(gap_hosts)} host(s) with a gap: {escape(', '.join(gap_hosts))}"
            if gap_hosts
            else "No gap on any host that answered."
        )
        + "</strong></p>",
        "<h2>Kernel coverage (host × package)</h2>",
        '<p class="legend">'
        + "".join(
            f'<span style="background:{bg};color:{fg}">{escape(v or "not installed")}</span>'
            for v, (bg, fg) in COLOURS.items()
        )
        + "</p>",
    ]
    if packages:
        parts.append('<table class="heat" id="heatmap"><tr><th>host</th><th>group</th>')
        parts += [f'<th class="p">{escape(p)}</th>' for p in packages]
        parts.append("</tr>")
        for host, verdicts in rows:
            group = letters.get(group_of.get(host, ""), "?")
            parts.append(f"<tr><th>{escape(host)}</th><td>{escape(group)}</td>")
            parts += [_cell(v) for v in verdicts]
            parts.append("</tr>")
        parts.append("</table>")
    else:
        parts.append(
            '<p class="meta" id="heatmap">No host reported packages with CUDA device code '
            "for a present or named GPU.</p>"
        )
    parts.append(
        _table_head(
            "Groups of identical hosts",
            ("group", "hosts", "GPUs", "driver", "toolkits", "python", "packages"),
        )
    )
    for group in report.groups:
        s = group.summary
        parts.append(
            f"<tr><td>{escape(letters[group.fingerprint])}</td>"
            f"<td>{escape(', '.join(group.hosts))}</td>"
            f"<td>{escape(', '.join(s.gpus) or 'none')}</td>"
            f"<td>{escape(s.driver or 'none')}</td><td>{escape(', '.join(s.toolkits) or '–')}</td>"
            f"<td>{escape(s.python)}</td><td>{len(s.packages)}</td></tr>"
        )
    parts.append("</table>")
    if report.drift:
        parts.append(_table_head("Drift between groups", ("what", "group", "only there")))
        for drift in report.drift:
            for fingerprint, values in drift.values:
                if values:
                    parts.append(
                        f"<tr><td>{escape(drift.field)}</td><td>{escape(letters[fingerprint])}</td>"
                        f"<td>{'<br>'.join(escape(v) for v in values)}</td></tr>"
                    )
        parts.append("</table>")
    gaps = [(h.name, g) for h in report.hosts for g in h.gaps]
    if gaps:
        parts.append("<h2>Gaps</h2><ul>")
        parts += [f"<li><strong>{escape(n)}</strong>: {escape(g)}</li>" for n, g in gaps]
        parts.append("</ul>")
    if report.unreachable:
        parts.append(_table_head("Not probed", ("host", "why", "message"), "unreachable"))
        for u in report.unreachable:
            parts.append(
                f'<tr><td>{escape(u.name)}</td><td class="bad">{escape(u.kind)}</td>'
                f"<td>{escape(u.message)}</td></tr>"
            )
        parts.append("</table>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
