"""``archgap matrix``'s outputs: a static site (``index.html``, a page per package) and
``matrix.json``, the same cells as a versioned document.

A package page has a row per variant (release, local label or index, wheel) and a column per GPU;
each cell links to its evidence further down the page (anchor ``e-ROW-COLUMN``): the wheel's
file name, sha256 and URL, the member and entry that decided it, and the command that re-derives
it. No script, no external resource; every value is escaped: a package's names, versions, member
paths and URLs come from an index and are data.
"""

from __future__ import annotations

import re
from html import escape
from typing import TYPE_CHECKING, Any

from archgap import __version__
from archgap.report.html import COLOURS, LEGEND
from archgap.report.jsondoc import document

if TYPE_CHECKING:
    from archgap.analysis.matrix import Cell, MatrixReport, PackageMatrix, Variant

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1f2328}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}.meta{color:#57606a}
table{border-collapse:collapse}td,th{padding:4px 8px;border:1px solid #d0d7de;text-align:left;
  vertical-align:top}th{background:#f6f8fa}
td.v{text-align:center;font-weight:600;min-width:72px}td.v a{color:inherit;text-decoration:none}
.ev{border-top:1px solid #d0d7de;padding:6px 0}.ev:target{background:#fff8c5}
code{font-size:12px;word-break:break-all}
"""


def page_name(package: str) -> str:
    """The package page's file name: its normalized name (PEP 503), which a requirement's name
    reduces to letters, digits, dots and dashes; anything else is never a path."""
    name = re.sub(r"[-_.]+", "-", package).lower()
    if not re.fullmatch(r"[a-z0-9][a-z0-9.-]*", name):
        name = "package-" + "".join(f"{ord(c):x}" for c in package)[:64]
    return f"{name}.html"


def anchor(row: int, column: int) -> str:
    return f"e-{row}-{column}"


def body(report: MatrixReport, seconds: float) -> dict[str, Any]:
    """The ``matrix`` JSON document."""
    return document(
        "matrix",
        {
            "gpus": [
                {"gpu": g.label, "compute_capability": str(g.compute_capability)}
                for g in report.gpus
            ],
            "indexes": list(report.indexes),
            "python_version": report.python_version,
            "platforms": list(report.platforms),
            "versions": report.versions,
            "packages": [_package_doc(p) for p in report.packages],
            "wheels_read": report.wheels_read,
            "bytes_fetched": report.bytes_fetched,
            "wheel_bytes": report.wheel_bytes,
            "seconds": round(seconds, 3),
        },
    )


def _package_doc(package: PackageMatrix) -> dict[str, Any]:
    page = page_name(package.package)
    return {
        "package": package.package,
        "page": page,
        "releases": list(package.releases),
        "problem": package.problem,
        "index_problems": list(package.index_problems),
        "bytes_fetched": package.bytes_fetched,
        "wheel_bytes": package.wheel_bytes,
        "variants": [
            {
                "version": v.version,
                "index": v.index,
                "wheel": v.wheel,
                "url": v.url,
                "sha256": v.sha256,
                "platform": v.platform,
                "cached": v.cached,
                "problem": v.problem,
                "cells": [
                    {**_cell_doc(c), "evidence": f"{page}#{anchor(row, column)}"}
                    for column, c in enumerate(v.cells)
                ],
            }
            for row, v in enumerate(package.variants)
        ],
    }


def _cell_doc(cell: Cell) -> dict[str, Any]:
    return {
        "gpu": cell.gpu,
        "compute_capability": cell.compute_capability,
        "verdict": cell.verdict,
        "reason": cell.reason,
        "entry": cell.entry,
        "member": cell.member,
        "needs": cell.needs,
    }


def _head(title: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>\n"
    )


def _gpu_header(report: MatrixReport) -> str:
    """A column per GPU: its name, and its compute capability when the name is not one."""
    cells = []
    for g in report.gpus:
        cc = str(g.compute_capability)
        below = "" if g.label == cc else f'<br><span class="meta">{escape(cc)}</span>'
        cells.append(f"<th>{escape(g.label)}{below}</th>")
    return "".join(cells)


def index_page(report: MatrixReport) -> str:
    """``index.html``: one row per package, linking to its page, with how its cells fell."""
    rows = []
    for package in report.packages:
        counts: dict[str, int] = {}
        for variant in package.variants:
            for c in variant.cells:
                counts[c.verdict] = counts.get(c.verdict, 0) + 1
        shown = ", ".join(f"{escape(k)} {n}" for k, n in sorted(counts.items()))
        state = escape(package.problem) if package.problem else shown or "nothing judged"
        rows.append(
            f'<tr><td><a href="{escape(page_name(package.package))}">'
            f"{escape(package.package)}</a></td><td>{escape(', '.join(package.releases))}</td>"
            f"<td>{len(package.variants)}</td><td>{state}</td></tr>"
        )
    gpus = ", ".join(f"{g.label} ({g.compute_capability})" for g in report.gpus)
    return (
        _head("archgap matrix")
        + "<h1>Compatibility matrix</h1>"
        + f'<p class="meta">judged from the wheels by archgap {escape(__version__)} on '
        + f"{escape(gpus)}; indexes: {escape(', '.join(report.indexes))}</p>\n"
        + '<table id="packages"><tr><th>package</th><th>releases</th><th>variants</th>'
        + "<th>cells</th></tr>\n"
        + "\n".join(rows)
        + "\n</table>\n"
        + _legend()
        + "</body></html>\n"
    )


def _legend() -> str:
    rows = "".join(
        f'<tr><td class="v" style="{_colour(k)}">{escape(k)}</td><td>{escape(LEGEND[k])}</td></tr>'
        for k in ("native", "jit", "partial", "blocked", "none", "unknown", "no-kernels")
    )
    return f"<h2>Legend</h2><table>{rows}</table>\n"


def _colour(verdict: str) -> str:
    background, foreground = COLOURS.get(verdict, COLOURS[""])
    return f"background:{background};color:{foreground}"


def _label(variant: Variant) -> str:
    return variant.version.partition("+")[2] or "default"


def package_page(report: MatrixReport, package: PackageMatrix) -> str:
    """A package's page: releases x variants rows, a column per GPU, then each cell's evidence."""
    parts = [_head(f"{package.package}: archgap matrix")]
    parts.append(f"<h1>{escape(package.package)}</h1><p class=\"meta\"><a href=\"index.html\">"
                 f"all packages</a> &middot; last {report.versions} releases: "
                 f"{escape(', '.join(package.releases) or 'none')}</p>\n")  # fmt: skip
    if package.problem:
        parts.append(f"<p>{escape(package.problem)}</p>\n")
    parts += [f'<p class="meta">{escape(p)}</p>\n' for p in package.index_problems]
    several = len(report.platforms) > 1  # then a column says which platform chose the wheel
    parts.append("<table id=\"matrix\"><thead><tr><th>release</th><th>variant</th>"
                 + ("<th>platform</th>" if several else "")
                 + f"<th>index</th>{_gpu_header(report)}</tr></thead><tbody>\n")  # fmt: skip
    for row, variant in enumerate(package.variants):
        parts.append(
            f'<tr class="release"><td>{escape(variant.version.split("+", 1)[0])}</td>'
            f"<td>{escape(_label(variant))}</td>"
            + (f"<td>{escape(variant.platform or 'this machine')}</td>" if several else "")
            + f"<td>{escape(variant.index)}</td>"
        )
        if variant.problem is not None:
            parts.append(f"<td colspan=\"{len(report.gpus)}\" class=\"v\" style=\""
                         f"{_colour('unknown')}\"><a href=\"#{anchor(row, 0)}\">unknown: "
                         f"{escape(variant.problem)}</a></td>")  # fmt: skip
        for column, c in enumerate(variant.cells):
            parts.append(f"<td class=\"v cell\" style=\"{_colour(c.verdict)}\" "
                         f"title=\"{escape(c.reason)}\"><a href=\"#{anchor(row, column)}\">"
                         f"{escape(c.verdict)}</a></td>")  # fmt: skip
        parts.append("</tr>\n")
    parts.append("</tbody></table>\n" + _legend() + "<h2>Evidence</h2>\n")
    for row, variant in enumerate(package.variants):
        parts.append(_evidence(row, variant))
    parts.append("</body></html>\n")
    return "".join(parts)


def _evidence(row: int, variant: Variant) -> str:
    head = (
        f"<p><b>{escape(variant.version)}</b> &middot; <code>{escape(variant.wheel)}</code>"
        f"<br>sha256 <code>{escape(variant.sha256 or 'not given by the index')}</code>"
        f"<br><code>{escape(variant.url)}</code>"
        + (" &middot; from the matrix cache" if variant.cached else "")
        + "</p>"
    )
    if variant.problem is not None:
        return (f"<div class=\"ev\" id=\"{anchor(row, 0)}\">{head}<p>unknown: could not be read: "
                f"{escape(variant.problem)}</p></div>\n")  # fmt: skip
    cells = []
    for column, c in enumerate(variant.cells):
        facts = [
            f"<b>{escape(c.gpu)} ({escape(c.compute_capability)}): {escape(c.verdict)}</b>",
            f"member <code>{escape(c.member)}</code>" if c.member else "",
            f"entry <code>{escape(c.entry)}</code>" if c.entry else "",
            f"needs {escape(c.needs)}" if c.needs else "",
            escape(c.reason),
            f"re-derive: <code>archgap scan {escape(variant.url)} --gpu "
            f"{escape(c.compute_capability)}</code>",
        ]
        cells.append(f"<div class=\"ev\" id=\"{anchor(row, column)}\">"
                     + "<br>".join(f for f in facts if f) + "</div>")  # fmt: skip
    return f"<section>{head}{''.join(cells)}</section>\n"


def text(report: MatrixReport, folder: str, seconds: float) -> str:
    """One line per package, then where the site is and what crossed the network."""
    lines = []
    for package in report.packages:
        if package.problem:
            lines.append(f"{package.package}: {package.problem}")
            continue
        cached = sum(1 for v in package.variants if v.cached)
        lines.append(
            f"{package.package}: {len(package.releases)} releases, {len(package.variants)} "
            f"variants ({cached} from the cache), {_mb(package.bytes_fetched)} fetched"
        )
    lines.append(
        f"{report.wheels_read} wheels read, {_mb(report.bytes_fetched)} fetched of "
        f"{_mb(report.wheel_bytes)} in {seconds:.1f} s; the site: {folder}/index.html"
    )
    return "\n".join(lines) + "\n"


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"
