"""archgap fleet: probe many machines (ssh, Slurm, or JSON from any engine) and compare them.

Groups hosts with identical fingerprints (GPUs, driver, toolkits, Python, packages, kernel
coverage, JIT outcome), shows the drift between groups, every host's gaps and the hosts that did
not answer. Exit codes: 0 every host answered and none has a gap; 1 a host has a gap; 2 a host
could not be probed (or a usage error).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from archgap.cli import options as opt
from archgap.cli.common import (
    EXIT_ERROR,
    EXIT_GAP,
    EXIT_OK,
    VERDICT_STYLE,
    Output,
    UsageError,
    request_or_usage_error,
)
from archgap.cli.engines import PROMETHEUS
from archgap.request import DEFAULT_SECTIONS
from archgap.transport.target import DEFAULT_PYTHON

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


def _host_lines(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    if args.hosts:
        return [(h.strip(), None) for h in args.hosts.split(",") if h.strip()]
    try:
        text = Path(args.hostfile).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--hostfile {args.hostfile}: {exc.strerror or exc}") from None
    hosts: list[tuple[str, str | None]] = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) > 2:
            raise UsageError(f"--hostfile: expected 'HOST [PYTHON]', got {line.strip()!r}")
        hosts.append((words[0], words[1] if len(words) == 2 else None))
    return hosts


def collect_hosts(args: argparse.Namespace, out: Output) -> Iterator[Any]:
    """Every host's facts or failure, as ``HostInput`` values, as they come (the report keeps
    a summary of each, not its facts)."""
    from archgap.analysis.fleet import HostInput
    from archgap.transport.run import TransportFailure, run_many
    from archgap.transport.slurm import run_probe_slurm
    from archgap.transport.target import DEFAULT_PYTHON, TargetError, ssh_target

    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    python = args.python or DEFAULT_PYTHON
    # None: each host's own interpreter (a hostfile may name one per host), filled in per target.
    request = request_or_usage_error(sections, None)
    if args.srun_args and not args.slurm:
        raise UsageError("arguments after -- are srun options: use them with --slurm")
    if args.from_paths:
        yield from read_documents(args.from_paths)
        return
    if args.slurm:
        slurm = run_probe_slurm(list(args.srun_args), request, python, args.timeout)
        yield from _engine_inputs(slurm.error, slurm.tasks, "slurm")
        return
    if args.ray:
        from archgap.transport.ray_fleet import run_probe_ray

        address = None if args.ray == "auto" else args.ray
        with out.status(f"probing the Ray cluster {args.ray}"):
            ray = run_probe_ray(address, request, args.python, args.timeout)
        yield from _engine_inputs(ray.error, ray.nodes, f"ray {args.ray}")
        return
    targets = []
    for spec, host_python in _host_lines(args):
        try:
            targets.append(ssh_target(spec, host_python or python, args.connect_timeout))
        except TargetError as exc:
            raise UsageError(str(exc)) from None
    if not targets:
        raise UsageError("no hosts given")
    if len({t.name for t in targets}) != len(targets):
        raise UsageError("a host is named twice")
    with out.progress("probing hosts", total=len(targets)) as advance:
        for target, result in run_many(targets, request, args.jobs, args.timeout):
            advance(target.name)
            if isinstance(result, TransportFailure):
                yield HostInput(target.name, None, result.kind, result.message, result.stderr)
            else:
                yield HostInput(target.name, result)


def _engine_inputs(error: Any, results: Any, engine: str) -> list[Any]:
    """``HostInput`` values from an engine that probes every node at once (Slurm, Ray)."""
    from archgap.analysis.fleet import HostInput
    from archgap.transport.run import TransportFailure

    if error is not None:
        return [HostInput(engine, None, error.kind, error.message, error.stderr)]
    return [
        HostInput(name, None, r.kind, r.message, r.stderr)
        if isinstance(r, TransportFailure)
        else HostInput(name, r, None)
        for name, r in results
    ]


def _documents_in(text: str) -> list[Any]:
    """JSON documents in a file: one document, JSON Lines, or ``host: {json}`` lines (pdsh)."""
    try:
        return [json.loads(text)]
    except (ValueError, RecursionError):
        pass
    docs: list[Any] = []
    for line in text.splitlines():
        start = line.find("{")
        if start < 0:
            continue
        prefix = line[:start].rstrip().rstrip(":").strip()
        try:
            doc = json.loads(line[start:])
        except (ValueError, RecursionError):
            continue
        docs.append({"__name": prefix, **doc} if prefix and isinstance(doc, dict) else doc)
    return docs


def _not_json(text: str) -> tuple[str, str]:
    """Why a file holds no JSON document: cut off inside one (a probe killed mid-write, a full
    disk), or no JSON at all."""
    body = text.strip()
    if body.startswith(("{", "[")):
        try:
            json.loads(body)
        except RecursionError:
            return "not-json", "JSON nested deeper than the parser goes"
        except json.JSONDecodeError as exc:
            if exc.pos >= len(body) - 1 or "Unterminated string" in exc.msg:
                return "truncated", f"the JSON stops after {len(body)} bytes, inside a value"
            return "not-json", f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
    return "not-json", "no JSON document in the file"


def read_documents(paths: list[str]) -> Iterator[Any]:
    """Probe output of any engine: archgap probe documents, raw facts, or the failures recorded;
    one file at a time.

    One ``HostInput`` per document read (a file without one counts as one, a failure)."""
    from archgap.analysis.fleet import HostInput

    files: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file())
        elif path.is_file():
            files.append(path)
        else:
            raise UsageError(f"--from {given}: no such file or directory")
    for file in files:
        try:
            text = file.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            yield HostInput(str(file), None, "unreadable", exc.strerror or str(exc))
            continue
        docs = _documents_in(text)
        if not docs:
            yield HostInput(str(file), None, *_not_json(text))
        for doc in docs:
            yield _host_from_document(doc, file)


def _host_from_document(doc: Any, file: Path) -> Any:
    from archgap.analysis.fleet import HostInput

    if not isinstance(doc, dict):
        return HostInput(str(file), None, "not-facts", "a JSON document that is not an object")
    given = doc.get("__name") or doc.get("target")
    if doc.get("command") == "probe" and isinstance(doc.get("error"), dict):
        err = doc["error"]
        name = str(given or file.stem)
        return HostInput(name, None, str(err.get("kind")), str(err.get("message")), "")
    facts = doc.get("facts") if doc.get("command") == "probe" else doc
    if not isinstance(facts, dict) or "sections" not in facts:
        return HostInput(str(file), None, "not-facts", "not archgap probe facts")
    name = str(facts.get("host") or file.stem) if given in (None, "local") else str(given)
    return HostInput(name, facts)


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.analysis.caches import cache_shares, shared_caches
    from archgap.analysis.compat import UnknownGpu, resolve_gpu
    from archgap.analysis.fleet import fleet_report, shape_problem

    named = [g.strip() for value in args.gpu for g in value.split(",") if g.strip()]
    try:
        for gpu in named:
            resolve_gpu(gpu)
    except UnknownGpu as exc:
        raise UsageError(str(exc)) from exc
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    started = time.monotonic()
    inputs = [0]  # hosts read, counted as the report takes them one by one
    shares: list[Any] = []  # each host's network-filesystem caches (small), for shared_caches

    def counted() -> Iterator[Any]:
        for host in collect_hosts(args, out):
            inputs[0] += 1
            # A malformed document is an unreadable host in the report, never a failed report.
            if host.facts is not None and shape_problem(host.facts) is None:
                with contextlib.suppress(TypeError, AttributeError, ValueError, KeyError):
                    shares.extend(cache_shares(host.name, host.facts))
            yield host

    report = fleet_report(counted(), named)
    shared = shared_caches(shares)
    elapsed = time.monotonic() - started
    documents = inputs[0] if args.from_paths else None
    headline = _headline(report, elapsed, documents)
    if args.html:
        from archgap.report.html import fleet_html

        try:
            Path(args.html).write_text(fleet_html(report, headline), encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--html {args.html}: {exc.strerror or exc}") from None
    if args.prometheus:
        from archgap.cli.engines import write_atomic
        from archgap.report.prometheus import fleet_metrics

        write_atomic(args.prometheus, fleet_metrics(report, time.time(), elapsed), "--prometheus")
    if out.json_mode:
        out.emit("fleet", {**body(report, elapsed, documents), "shared_caches": shared})
    elif out.format in ("markdown", "csv", "summary"):
        from archgap.report import fleet_tables

        render = {"markdown": fleet_tables.markdown, "summary": fleet_tables.summary}
        sys.stdout.write(render.get(out.format, fleet_tables.csv)(report, elapsed))
    else:
        print_report(out, report, headline, args.html)
        _print_shared_caches(out, shared)
    if report.unreachable:
        return EXIT_ERROR
    return EXIT_GAP if report.gap_hosts else EXIT_OK


def _print_shared_caches(out: Any, shared: Any) -> None:
    """JIT caches on a network filesystem that hosts with different GPUs use (analysis/caches)."""
    from rich.markup import escape

    if not shared:
        return
    out.print("\n[bold yellow]JIT caches shared by different GPUs[/]")
    for s in shared:
        out.print(f"  {escape(s.message)} ({escape(s.filesystem)})")
        out.print(f"    hosts: {escape(', '.join(s.hosts))}")


def _headline(report: Any, elapsed: float, documents: int | None) -> str:
    """What was read: hosts probed (ssh, Slurm, Ray), or documents read (--from)."""
    answered, failed = len(report.hosts), len(report.unreachable)
    groups = f"{len(report.groups)} group(s) of identical hosts"
    if documents is None:
        return f"{answered}/{answered + failed} hosts answered in {elapsed:.1f} s · {groups}"
    return (
        f"{documents} document(s) read in {elapsed:.1f} s: {answered} with facts, "
        f"{failed} without · {groups}"
    )


def body(report: Any, elapsed: float, documents: int | None = None) -> dict[str, Any]:
    from archgap.analysis.fleet import coverage_matrix, jit_matrix

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
        "gap": bool(report.gap_hosts),
        "seconds": round(elapsed, 3),
    }


def print_report(out: Any, report: Any, headline: str, html: str | None) -> None:
    from rich.markup import escape

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
    from rich.markup import escape

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
    from rich.markup import escape

    by_gap = report.hosts_by("gaps")
    if by_gap:
        out.print("\n[bold red]Gaps[/]")
        for gap, names in by_gap.items():
            out.print(f"  {escape(_hostlist(names))} ({len(names)}): {escape(gap)}")
    for problem, names in list(report.hosts_by("problems").items())[:20]:
        out.print(f"[magenta]![/] {escape(_hostlist(names))}: {escape(problem)}")
