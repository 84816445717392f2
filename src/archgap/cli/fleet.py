"""archgap fleet: probe many machines (ssh, Slurm, or JSON from any engine) and compare them.

Groups hosts with identical fingerprints (GPUs, driver, toolkits, Python, packages, kernel
coverage, JIT outcome), shows the drift between groups, every host's gaps and the hosts that did
not answer. Exit codes: 0 every host answered and none has a gap; 1 a host has a gap; 2 a host
could not be probed (or a usage error).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archgap.cli import options as opt
from archgap.cli.common import VERDICT_STYLE, Output, UsageError, escape
from archgap.cli.engines import PROMETHEUS
from archgap.request import DEFAULT_SECTIONS
from archgap.transport.target import DEFAULT_PYTHON

if TYPE_CHECKING:
    from archgap.api import FleetRun
    from archgap.transport.fleet import FleetSource

HELP = "probe many hosts (ssh, Slurm, or probe JSON from any engine) and compare them"
DESCRIPTION = (
    "Probe hosts and group identical ones; show drift, gaps and unreachable hosts. Exit 0: all "
    "answered, no gap; 1: a host has a gap; 2: a host could not be probed."
)
# Where the hosts' facts come from: exactly one.
SOURCES = opt.one_of(
    opt.option("--hosts", metavar="H1,H2", help="[user@]host[:port] list (ssh)"),
    opt.option("--hostfile", metavar="FILE", help="one host per line: [user@]host[:port] [PYTHON]"),
    opt.flag("--slurm", "one probe per node with srun --ntasks-per-node=1; srun options after --"),
    opt.from_option(
        "ingest probe JSON written by any engine (archgap probe, the --script, pdsh/clush)"
    ),
    opt.option(
        "--ray",
        nargs="?",
        const="auto",
        metavar="ADDRESS",
        help="one probe per alive node of a Ray cluster (ADDRESS as ray.init takes it; default: "
        "RAY_ADDRESS or the local cluster); needs pip install 'archgap[ray]'; without --python "
        "each node inspects its Ray worker's interpreter",
    ),
    required=True,
)
OPTIONS = (
    SOURCES,
    opt.option(
        "--python",
        metavar="PATH",
        default=None,
        help=f"the interpreter to inspect on every host (default {DEFAULT_PYTHON})",
    ),
    opt.gpu_option("also judge every host against this GPU (12.0, sm_120, a name); repeatable"),
    opt.option("--jobs", type=int, default=32, metavar="N", help="hosts at a time"),
    opt.timeouts(),
    opt.sections_option(",".join(DEFAULT_SECTIONS)),
    opt.option("--html", metavar="FILE", help="also write a self-contained HTML page"),
    PROMETHEUS,
    opt.option("srun_args", nargs="*", metavar="-- SRUN_ARGS", help=argparse.SUPPRESS),
    opt.output(opt.SUMMARY_FORMATS),
)


def _source(args: argparse.Namespace) -> FleetSource:
    from archgap.transport.fleet import FleetSource, hostfile_hosts

    if args.srun_args and not args.slurm:
        raise UsageError("arguments after -- are srun options: use them with --slurm")
    hosts: list[tuple[str, str | None]] = []
    if args.hosts:
        hosts = [(h.strip(), None) for h in args.hosts.split(",") if h.strip()]
    elif args.hostfile:
        hosts = hostfile_hosts(args.hostfile)
    documents = tuple(args.from_paths or ())
    return FleetSource(tuple(hosts), bool(args.slurm), tuple(args.srun_args), args.ray, documents)


def _fleet_run(args: argparse.Namespace, out: Output, named: list[str]) -> FleetRun:
    """Every host probed (a progress bar as ssh hosts answer) or read, and compared."""
    from archgap.api import fleet_run
    from archgap.transport.fleet import FleetOptions

    source = _source(args)
    sections = tuple(s.strip() for s in args.sections.split(",") if s.strip())
    options = FleetOptions(sections, args.python, args.jobs, args.timeout, args.connect_timeout)
    ray = f"probing the Ray cluster {args.ray}"
    waiting = out.status(ray) if source.ray else contextlib.nullcontext()
    progress = out.counter("probing hosts") if source.hosts else contextlib.nullcontext(None)
    with waiting, progress as tell:
        return fleet_run(source, named, options, tell)


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.analysis.compat import UnknownGpu
    from archgap.report.fleet import body, headline
    from archgap.request import UnknownSection
    from archgap.transport.fleet import FleetInputError

    named = [g.strip() for value in args.gpu for g in value.split(",") if g.strip()]
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    try:
        fleet = _fleet_run(args, out, named)
    except (UnknownGpu, FleetInputError) as exc:
        raise UsageError(str(exc)) from exc
    except UnknownSection as exc:
        raise UsageError(f"--sections: {exc}") from None
    report, elapsed = fleet.report, fleet.elapsed
    title = headline(report, elapsed, fleet.documents)
    if args.html:
        from archgap.report.html import fleet_html

        try:
            Path(args.html).write_text(fleet_html(report, title), encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--html {args.html}: {exc.strerror or exc}") from None
    if args.prometheus:
        from archgap.cli.engines import write_atomic
        from archgap.report.prometheus import fleet_metrics

        write_atomic(args.prometheus, fleet_metrics(report, time.time(), elapsed), "--prometheus")
    if out.json_mode:
        out.emit("fleet", body(report, elapsed, fleet.documents, fleet.shared_caches))
    elif out.format in ("markdown", "csv", "summary"):
        from archgap.report import fleet_tables

        render = {"markdown": fleet_tables.markdown, "summary": fleet_tables.summary}
        sys.stdout.write(render.get(out.format, fleet_tables.csv)(report, elapsed))
    else:
        print_report(out, report, title, args.html)
        _print_shared_caches(out, fleet.shared_caches)
    return report.exit_code


def _print_shared_caches(out: Any, shared: Any) -> None:
    """JIT caches on a network filesystem that hosts with different GPUs use (analysis/caches)."""
    if not shared:
        return
    out.print("\n[bold yellow]JIT caches shared by different GPUs[/]")
    for s in shared:
        out.print(f"  {escape(s.message)} ({escape(s.filesystem)})")
        out.print(f"    hosts: {escape(', '.join(s.hosts))}")


def print_report(out: Any, report: Any, headline: str, html: str | None) -> None:
    out.print(f"[bold]{escape(headline)}[/]")
    letters = report.group_letters
    for group in report.groups:
        s = group.summary
        out.print(
            f"\n[bold]group {letters[group.fingerprint]}[/] ({len(group.hosts)} host(s), "
            f"fingerprint {group.fingerprint}): {escape(_hostlist(group.hosts))}"
        )
        out.print(f"  GPUs      {escape(', '.join(s.gpus) or 'none')}")
        out.print(f"  driver    {escape(s.driver or 'none')}")
        out.print(f"  toolkits  {escape(', '.join(s.toolkits) or 'none found')}")
        out.print(f"  python    {escape(s.python)} · {len(s.packages)} packages")
        if s.env:
            out.print(f"  env       {escape(' '.join(s.env))}")
        for c in s.coverage:
            style = VERDICT_STYLE.get(c.verdict, "")
            out.print(
                f"  kernels   {escape(c.package)} {escape(c.version)} on {c.gpu}: "
                f"[{style}]{c.verdict}[/]"
            )
        for line in s.jit:
            out.print(f"  [yellow]JIT[/]       {escape(line)}")
    _print_drift(out, report)
    _print_gaps(out, report)
    if report.unreachable:
        out.print("\n[bold red]Not probed[/]")
        for u in report.unreachable:
            out.print(f"  {escape(u.name)}: [red]{u.kind}[/] {escape(u.message)}")
    if html:
        out.print(f"\nHTML report: {escape(os.path.abspath(html))}")


def _hostlist(names: Any, limit: int = 240) -> str:
    """Hosts in hostlist form, cut after ``limit`` characters (--json lists every host)."""
    from archgap.analysis.fleet import compress_hosts

    text = compress_hosts(names)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(names)} hosts)"


def _shown(values: tuple[str, ...], sign: str) -> str:
    listed = ", ".join(sign + v for v in values[:6])
    return listed + (f" (+{len(values) - 6} more)" if len(values) > 6 else "")


def _print_drift(out: Any, report: Any) -> None:
    """Each group's differences from the baseline (the largest group), field by field."""
    baseline = report.baseline
    if not report.drift or baseline is None:
        return
    letters = report.group_letters
    sizes = {g.fingerprint: len(g.hosts) for g in report.groups}
    out.print(
        f"\n[bold]Drift against group {letters[baseline.fingerprint]}[/] (the largest, "
        f"{len(baseline.hosts)} host(s)); + only in the group, - only in "
        f"{letters[baseline.fingerprint]}"
    )
    current = None
    for d in report.drift:
        if d.group != current:
            current = d.group
            out.print(f"  [bold]group {letters[d.group]}[/] ({sizes[d.group]} host(s))")
        changes = "; ".join(x for x in (_shown(d.added, "+"), _shown(d.removed, "-")) if x)
        out.print(f"    {d.field:9} {escape(changes)}")


def _print_gaps(out: Any, report: Any) -> None:
    """Each distinct gap once, with the hosts that have it."""
    by_gap = report.hosts_by("gaps")
    if by_gap:
        out.print("\n[bold red]Gaps[/]")
        for gap, names in by_gap.items():
            out.print(f"  {escape(_hostlist(names))} ({len(names)}): {escape(gap)}")
    for problem, names in list(report.hosts_by("problems").items())[:20]:
        out.print(f"[magenta]![/] {escape(_hostlist(names))}: {escape(problem)}")
