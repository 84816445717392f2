"""The "JIT caches" section of `archgap scan` as text lines (rich markup, escaped values)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from archgap.report.markup import escape
from archgap.report.table import VERDICT_STYLE

if TYPE_CHECKING:
    from archgap.analysis.jit.caches import AuditedCache, CacheReport

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}


def _cache_lines(cache: AuditedCache) -> list[str]:
    where = f" on {cache.filesystem}" if cache.filesystem else ""
    head = f"  {cache.cache} {escape(cache.path)} [dim]({escape(cache.found_by)}{where})[/]"
    lines = [
        head + f" {len(cache.entries)} build(s)" + (", more not read" if cache.truncated else "")
    ]
    if cache.problem:
        lines.append(f"    [magenta]{escape(cache.problem)}[/]")
    for flag in cache.flags:
        lines.append(f"    [{SEVERITY_STYLE[flag.severity]}]{flag.kind}[/]: {escape(flag.message)}")
    for entry in cache.entries:
        verdicts = " ".join(
            f"{escape(v.gpu)} [{VERDICT_STYLE.get(v.verdict, '')}]{v.verdict}[/]"
            for v in entry.verdicts
        )
        built = ", ".join(entry.targets) or "no device code"
        version = f" {entry.package_version}" if entry.package_version else ""
        lines.append(f"    {escape(entry.key)}{escape(version)}: {built}  {verdicts}")
        if entry.toolkit:
            lines.append(f"      [dim]toolkit {escape(entry.toolkit)}[/]")
        for flag in entry.flags:
            style = SEVERITY_STYLE[flag.severity]
            lines.append(f"      [{style}]{flag.kind}[/]: {escape(flag.message)}")
    return lines


def cache_lines(report: CacheReport) -> list[str]:
    source = f"environment: {report.env_source}" + (f", HOME {report.home}" if report.home else "")
    lines = ["", f"[bold]JIT caches[/] ({escape(source)}; read only, nothing is deleted)"]
    for cache in report.caches:
        if cache.exists:
            lines += _cache_lines(cache)
    absent = [f"{c.cache} {c.path}" for c in report.caches if not c.exists]
    if absent:
        lines.append(f"  [dim]absent: {escape(', '.join(absent))}[/]")
    return lines
