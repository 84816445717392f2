"""The fleet report: the document (what ``api.fleet`` returns), the line that says what was read,
and the text (rich-markup lines: each group, the drift between groups, the gaps, the hosts not
probed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from archgap.analysis.fleet import compress_hosts, coverage_matrix, jit_matrix
from archgap.report.markup import escape
from archgap.report.table import VERDICT_STYLE

if TYPE_CHECKING:
    from archgap.analysis.fleet import FleetReport
    from archgap.analysis.jit.caches import SharedCache


def headline(report: FleetReport, elapsed: float, documents: int | None) -> str:
    """What was read: hosts probed (ssh, Slurm, Ray), or documents read (--from)."""
    answered, failed = len(report.hosts), len(report.unreachable)
    groups = f"{len(report.groups)} group(s) of identical hosts"
    if documents is None:
        return f"{answered}/{answered + failed} hosts answered in {elapsed:.1f} s · {groups}"
    stale = len(report.stale_hosts)
    return (
        f"{documents} document(s) read in {elapsed:.1f} s: {answered} with facts"
        + (f" ({stale} stale)" if stale else "")
        + f", {failed} without · {groups}"
    )


def document(run: Any) -> dict[str, Any]:
    """The fleet document of a run (``api.fleet``'s ``FleetRun``: report, elapsed, documents,
    shared_caches): what ``archgap fleet --json`` prints."""
    from archgap.report.jsondoc import document as envelope

    return envelope("fleet", body(run.report, run.elapsed, run.documents, run.shared_caches))


def body(
    report: FleetReport,
    elapsed: float,
    documents: int | None = None,
    shared: Sequence[SharedCache] = (),
) -> dict[str, Any]:
    """The body of the fleet document (schema/fleet.schema.json); ``documents``: how many were
    read (--from), None when the hosts were probed; ``shared``: the JIT caches hosts with
    different GPUs share."""
    packages, rows = coverage_matrix(report)
    jit_packages, jit_rows = jit_matrix(report)
    baseline = report.baseline
    return {
        "hosts": report.hosts,
        "groups": [
            {"fingerprint": g.fingerprint, "hosts": g.hosts, "size": len(g.hosts)}
            for g in report.groups
        ],
        "baseline": baseline.fingerprint if baseline else None,
        "drift": report.drift,
        "unreachable": report.unreachable,
        "coverage": {
            "packages": packages,
            "rows": [{"host": host, "verdicts": verdicts} for host, verdicts in rows],
        },
        "jit_coverage": {
            "packages": jit_packages,
            "rows": [{"host": host, "statuses": statuses} for host, statuses in jit_rows],
        },
        "documents": documents,
        "duplicate_hosts": report.duplicate_hosts,
        "gap": bool(report.gap_hosts),
        "exit_code": report.exit_code,
        "seconds": round(elapsed, 3),
        "shared_caches": shared,
    }


def text(
    report: FleetReport, headline: str, html: str = "", shared: Sequence[SharedCache] = ()
) -> list[str]:
    """The text report: ``headline``, each group's summary, the drift, the gaps, the hosts not
    probed, where the ``html`` page was written (its absolute path) and the ``shared`` caches."""
    lines = [f"[bold]{escape(headline)}[/]"]
    lines += [
        f"[yellow]warning:[/] host name {escape(name)} is claimed by more than one document: "
        "each is judged as it came (metrics show the worst)"
        for name in report.duplicate_hosts
    ]
    letters = report.group_letters
    environments = _environments(report)
    for group in report.groups:
        s = group.summary
        lines += [
            f"\n[bold]group {letters[group.fingerprint]}[/] ({len(group.hosts)} host(s), "
            f"fingerprint {group.fingerprint}): {escape(_hostlist(group.hosts))}",
            f"  GPUs      {escape(', '.join(s.gpus) or 'none')}",
            f"  driver    {escape(s.driver or 'none')}",
            f"  toolkits  {escape(', '.join(s.toolkits) or 'none found')}",
            f"  python    {escape(s.python)} · {len(s.packages)} packages",
            f"  judged in {escape(environments[group.fingerprint])}",
        ]
        if s.env:
            lines.append(f"  env       {escape(' '.join(s.env))}")
        for c in s.coverage:
            style = VERDICT_STYLE.get(c.verdict, "")
            lines.append(
                f"  kernels   {escape(c.package)} {escape(c.version)} on {c.gpu}: "
                f"[{style}]{c.verdict}[/]"
            )
        lines += [f"  [yellow]JIT[/]       {escape(line)}" for line in s.jit]
    lines += _drift(report) + _gaps(report)
    lines += _stale(report)
    if report.unreachable:
        lines.append("\n[bold red]Not probed[/]")
        for u in report.unreachable:
            lines.append(f"  {escape(u.name)}: [red]{u.kind}[/] {escape(u.message)}")
            lines += [f"    stderr: {escape(line)}" for line in _stderr_tail(u.stderr, u.message)]
    if html:
        import os

        lines.append(f"\nHTML report: {escape(os.path.abspath(html))}")
    if shared:  # JIT caches on a network filesystem that hosts with different GPUs use
        lines.append("\n[bold yellow]JIT caches shared by different GPUs[/]")
        for cache in shared:
            lines.append(f"  {escape(cache.message)} ({escape(cache.filesystem)})")
            lines.append(f"    hosts: {escape(', '.join(cache.hosts))}")
    return lines


def _environments(report: FleetReport, shown: int = 3) -> dict[str, str]:
    """Per group (by fingerprint), the environment(s) its hosts were judged in: the shell's,
    or what --env-from named (each host's own /proc/PID/environ, say); --json has each host's."""
    by_group: dict[str, dict[str, None]] = {}
    for host in report.hosts:
        by_group.setdefault(host.fingerprint, {})[host.environment] = None
    described = {}
    for fingerprint, seen in by_group.items():
        names = [_environment(e) for e in seen]
        more = f" (+{len(names) - shown} more)" if len(names) > shown else ""
        described[fingerprint] = ", ".join(names[:shown]) + more
    return described


def _environment(source: str) -> str:
    return "the shell's environment" if source == "shell" else source


def _stderr_tail(stderr: str, message: str, lines: int = 3) -> list[str]:
    """The last lines of what a host's probe (or the engine: srun, ssh) wrote on stderr, the
    reason a failure often gives only there (srun's 'execve(): python3: No such file or
    directory' under --export=NONE); none that the message already says. --json has it whole."""
    from archgap.report.visible import one_line

    tail = [one_line(line)[:200] for line in stderr.splitlines() if line.strip()][-lines:]
    return [line for line in tail if line.strip() not in message]


def _stale(report: FleetReport, limit: int = 20) -> list[str]:
    """Hosts whose facts are not live: those without a collection time in one line, the others
    one line each with when (the oldest first, ``limit`` of them; --json lists every host)."""
    if not report.stale_hosts:
        return []
    lines = ["\n[bold yellow]Stale[/] (the verdicts shown for them are the last known, not live)"]
    by_reason: dict[str, list[str]] = {}
    for host in report.stale_hosts:
        by_reason.setdefault(host.stale, []).append(host.name)
    unknown = [(why, names) for why, names in by_reason.items() if not why.startswith("collected")]
    dated = sorted((why, names) for why, names in by_reason.items() if why.startswith("collected"))
    for why, names in unknown + dated[:limit]:
        lines.append(f"  {escape(_hostlist(names))}: [yellow]stale[/] {escape(why)}")
    if len(dated) > limit:
        lines.append(f"  … {len(dated) - limit} more stale document(s) (--json lists them)")
    return lines


def _hostlist(names: Sequence[str], limit: int = 240) -> str:
    """Hosts in hostlist form, cut after ``limit`` characters (--json lists every host)."""
    text = compress_hosts(names)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(names)} hosts)"


def _shown(values: tuple[str, ...], sign: str) -> str:
    listed = ", ".join(sign + v for v in values[:6])
    return listed + (f" (+{len(values) - 6} more)" if len(values) > 6 else "")


def _drift(report: FleetReport) -> list[str]:
    """Each group's differences from the baseline (the largest group), field by field."""
    baseline = report.baseline
    if not report.drift or baseline is None:
        return []
    letters = report.group_letters
    sizes = {g.fingerprint: len(g.hosts) for g in report.groups}
    lines = [
        f"\n[bold]Drift against group {letters[baseline.fingerprint]}[/] (the largest, "
        f"{len(baseline.hosts)} host(s)); + only in the group, - only in "
        f"{letters[baseline.fingerprint]}"
    ]
    current = None
    for d in report.drift:
        if d.group != current:
            current = d.group
            lines.append(f"  [bold]group {letters[d.group]}[/] ({sizes[d.group]} host(s))")
        changes = "; ".join(x for x in (_shown(d.added, "+"), _shown(d.removed, "-")) if x)
        lines.append(f"    {d.field:9} {escape(changes)}")
    return lines


def _gaps(report: FleetReport) -> list[str]:
    """Each distinct gap once, with the hosts that have it."""
    lines = []
    by_gap = report.hosts_by("gaps")
    stale = {h.name for h in report.stale_hosts}
    if by_gap:
        lines.append("\n[bold red]Gaps[/]")
        for gap, names in by_gap.items():
            old = [n for n in names if n in stale]
            note = f", {len(old)} stale: {_hostlist(old, 80)}" if old else ""
            lines.append(
                f"  {escape(_hostlist(names))} ({len(names)}{escape(note)}): {escape(gap)}"
            )
    for problem, names in list(report.hosts_by("problems").items())[:20]:
        lines.append(f"[magenta]![/] {escape(_hostlist(names))}: {escape(problem)}")
    return lines
