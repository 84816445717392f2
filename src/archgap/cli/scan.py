"""archgap scan: can every package of this Python environment run on these GPUs?"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from archgap.cli import options as opt
from archgap.cli.common import (
    EXIT_GAP,
    EXIT_OK,
    VERDICT_STYLE,
    Output,
    UsageError,
    target_from_args,
    terminal_safe,
)
from archgap.cli.engines import CLUSTER_ENGINES

if TYPE_CHECKING:
    from archgap.analysis.scan import ScanReport
    from archgap.probe.facts import ToolchainFacts, Toolkit


HELP = "verdict per package x GPU from the kernels in every native library"
DESCRIPTION = "For every installed package that carries CUDA code: can it run on each GPU?"
OPTIONS = (
    opt.option(
        "archives",
        nargs="*",
        metavar="WHEEL",
        help="judge wheels and conda packages before installing them: .whl, .conda and .tar.bz2 "
        "files, directories of them, their URLs, or requirements (sgl-kernel==0.3.21) resolved "
        "like pip from your indexes; or container images before deploying them: oci:DIR[:TAG], "
        "docker-archive:FILE, docker://REF, rootfs:DIR (default: the environment of --python)",
    ),
    opt.RESOLVING,
    opt.REGISTRY,
    opt.ENVIRONMENT,
    opt.gpu_option(
        "judge against this GPU: a compute capability (12.0, sm_120) or a name (RTX PRO 6000, "
        "H100, B200, GB10); repeatable, comma-separated"
    ),
    opt.require_option("like --gpu, for CI gates: exit 1 if any package cannot run on it"),
    opt.flag("--libs", "show the per-library view"),
    opt.option(
        "--driver",
        metavar="VERSION",
        help="judge against this NVIDIA driver (580.65.06) instead of the detected one: the PTX "
        "ISA it can JIT and the CUDA runtimes (cudart/nvrtc wheels, torch) it can run",
    ),
    opt.STRICT,
    opt.env_from_option(
        "resolve toolkits and JIT settings with a service's environment: a process id "
        "(/proc/PID/environ), an env file (KEY=VALUE lines) or `docker inspect` JSON"
    ),
    opt.output(opt.SUMMARY_FORMATS),
    opt.TARGET,
    CLUSTER_ENGINES,
)


def run(args: argparse.Namespace, out: Output) -> int:
    if not args.health:
        return _run(args, out)
    from archgap.cli.engines import finish_health
    from archgap.report.health import failure

    try:
        return _run(args, out)
    except UsageError as exc:  # the health check's one line, on stdout, for the scheduler's log
        code = "probe-failed" if str(exc).startswith("probe:") else "usage"
        return finish_health(args, failure(code, str(exc).removeprefix("probe: ")))


def _run(args: argparse.Namespace, out: Output) -> int:
    from archgap.analysis.compat import UnknownGpu
    from archgap.api import ProbeError, scan
    from archgap.cli.engines import check_scan_options, write_scan_files

    check_scan_options(args)
    named = [*args.gpu, *args.require]
    target = target_from_args(args)
    out.note(f"scanning {target.name}")
    started = time.monotonic()
    try:
        options = {"driver": args.driver, "strict": args.strict}
        if args.archives:
            report = _scan_archives(args, named, target.is_local)
        elif target.is_local:  # n/N as the native files are read
            with out.counter("reading native files") as tell:
                report = scan(
                    args.python, gpus=named, target=target, env_from=args.env_from,
                    root=args.root, timeout=args.timeout, progress=tell, **options,
                )  # fmt: skip
        else:  # a remote probe tells nothing until it is done
            with out.status(f"scanning {target.name}"):
                report = scan(
                    args.python, gpus=named, target=target, env_from=args.env_from,
                    root=args.root, timeout=args.timeout, **options,
                )  # fmt: skip
    except (UnknownGpu, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    except ProbeError as exc:
        write_scan_files(args, None, time.monotonic() - started)
        raise UsageError(f"probe: {exc}") from exc
    elapsed = time.monotonic() - started
    write_scan_files(args, report, elapsed)
    if args.health:
        from archgap.cli.engines import finish_health, missing_gpus
        from archgap.report.health import health

        return finish_health(args, health(report, missing_gpus(args, report)))
    env = report.environment
    if not env.site_packages:  # errors first: one line, not a report of an empty environment
        why = "; ".join(p.reason for p in env.problems) or f"no site-packages in {env.executable}"
        raise UsageError(why)
    if out.json_mode:
        from archgap.report.scan import body

        out.emit("scan", body(report, elapsed))
    elif out.format == "summary":
        from archgap.report.scan import summary

        sys.stdout.write(terminal_safe(summary(report, elapsed)) + "\n")
    elif out.format in ("markdown", "csv"):
        from archgap.report import scan as rendering

        render = rendering.markdown if out.format == "markdown" else rendering.csv
        sys.stdout.write(terminal_safe(render(report, args.libs)))
    else:
        _print_report(out, report, args.libs, elapsed)
    return EXIT_GAP if report.has_gap else EXIT_OK


def _scan_archives(args: argparse.Namespace, named: list[str], local: bool) -> ScanReport:
    from archgap.api import scan_archives

    if not local or args.python or args.env_from:
        raise UsageError(
            "wheels and images are read here: not with --python, --env-from or a remote target"
        )
    return scan_archives(
        args.archives, gpus=named, driver=args.driver, strict=args.strict,
        options=opt.index_options(args),
    )  # fmt: skip


def _print_jit(out: Output, report: ScanReport) -> None:
    from archgap.report.table import markup_escape as e

    if report.toolchains is not None:
        _print_toolkits(out, report.toolchains)
    if not report.jit:
        return
    out.print("\n[bold]JIT compilers[/]")
    for f in report.jit:
        style = {"fails": "bold red", "ok": "green"}.get(f.status, "magenta")
        where = f" on {f.gpu} ({f.compute_capability})" if f.gpu else ""
        if f.status == "ok":  # checked and works: one line
            out.print(f"  [{style}]ok[/] {e(f.cause)}")
            continue
        out.print(f"  [{style}]{f.status}[/] {e(f.package)} {e(f.version)}{e(where)} — {e(f.when)}")
        if f.error:
            out.print(f"    [bold]error:[/] {e(f.error)}")
        out.print(f"    [bold]cause:[/] {e(f.cause)}")
        for fact in f.chain:
            out.print(f"      · {e(fact.what)} [dim]← {e(fact.source)}[/]")
        for i, fix in enumerate(f.fixes, 1):
            out.print(f"    [green]fix {i}:[/] {e(fix.action)}")
            if fix.command:
                out.print(f"           $ {e(fix.command)}")
            for name, value in fix.env:
                out.print(f"           {e(name)}={e(value)}")
            out.print(f"           [dim]{e(fix.tradeoff)}[/]")


def _print_toolkits(out: Output, toolchains: ToolchainFacts) -> None:
    """One line per distinct tool (several lookups often reach the same nvcc)."""
    from archgap.report.table import markup_escape as e

    found_by: dict[str, list[str]] = {}
    first: dict[str, Toolkit] = {}
    for tk in toolchains.toolkits:
        if tk.status == "missing":
            continue
        key = f"{tk.real_home or tk.home}:{tk.tool}:{tk.component}"
        found_by.setdefault(key, []).append(tk.found_by)
        first.setdefault(key, tk)
    if not first:
        return
    out.print(f"[bold]Toolkits[/] (environment: {e(toolchains.env_source)})")
    for key, tk in first.items():
        name = tk.tool or f"{tk.component or 'toolkit'} wheel"
        version = tk.full_version or tk.version or "?"
        state = (
            ""
            if tk.status in ("ok", "wheel")
            else f" [magenta]{tk.status}: {e(tk.reason or '')}[/]"
        )
        via = ", ".join(dict.fromkeys(found_by[key]))
        out.print(
            f"  {e(name)} {e(version)}{state} [dim]{e(tk.tool_path or tk.home)} ({e(via)})[/]"
        )


def _print_environment(out: Output, report: ScanReport) -> None:
    """What was judged: the interpreter, or the archives and images (with their Python)."""
    from archgap.report.table import markup_escape as e

    env = report.environment
    source = f" [dim]({e(out.python_source)})[/]" if out.python_source else ""
    if env.executable:
        from archgap.report.scan import where

        version = env.python_version or "?"
        out.print(f"[bold]Python[/] {e(env.executable)} ({version}){e(where(report))}{source}")
        return
    from archgap.report.scan import environment_label

    head, _, names = environment_label(report).partition(" ")
    out.print(f"[bold]{head}[/] {e(names)} (not installed; no toolchain or JIT checks)")
    for image in report.images:
        for site in image.sites:
            out.print(f"  Python {site.python_version} {e(site.path)} ({site.kind})")


def _print_report(out: Output, report: ScanReport, libs: bool, elapsed: float) -> None:
    from archgap.report.scan import (
        gap_count,
        library_table,
        not_counted,
        package_table,
    )
    from archgap.report.table import markup_escape as e
    from archgap.report.table import text_lines

    _print_environment(out, report)
    facts = report.gpu_facts
    if facts.gpus:
        driver = f", driver {facts.driver_version}" if facts.driver_version else ""
        out.print(f"[bold]GPUs[/] {len(facts.gpus)} found by {facts.source}{driver}")
    elif any(g.role == "matrix" for g in report.gpus):
        out.print("[bold]GPUs[/] none found, none named: the default matrix (information only)")
    for problem in () if out.quiet else report.problems:
        out.print(f"[magenta]![/] {e(problem.subject)}: {e(problem.reason)}")

    table = package_table(report)
    if table.rows:
        out.lines(text_lines(table, out.width, out.terminal))
    else:
        out.print("No installed package carries CUDA device code.")

    if libs and table.rows:
        out.print("")
        out.lines(text_lines(library_table(report), out.width, out.terminal))
        uncounted = not_counted(report)
        if uncounted:
            out.print("[bold]Not counted[/] (only kernel libraries decide a package's verdict)")
            for line in uncounted:
                out.print(f"  [dim]{e(line)}[/]")

    notes = [p for p in report.packages if p.verdict != "native" or p.notes]
    if notes:
        out.print("\n[bold]Why[/]")
        for p in notes:
            style = VERDICT_STYLE.get(p.verdict, "default")
            out.print(f"  {e(p.package)} on {e(p.gpu)}: [{style}]{p.verdict}[/] — {e(p.reason)}")
            for note in p.notes:
                out.print(f"    [dim]{e(note)}[/]")
    _print_platform_and_load(out, report)
    _print_jit(out, report)
    if report.caches is not None:
        from archgap.cli.caches_text import cache_lines

        out.print("\n".join(cache_lines(report.caches)))
    gaps = gap_count(report)
    verdict = (
        f"[bold red]{gaps} gap(s)[/] on a present or named GPU"
        if gaps
        else "[green]no gap[/] on a present or named GPU"
    )
    out.print(f"\n{verdict} · {_where_the_time_went(report, elapsed)}")


def _print_platform_and_load(out: Output, report: ScanReport) -> None:
    """What stops the environment from running at all: the host's CPU, a broken load link."""
    from archgap.report.scan import load_lines
    from archgap.report.table import markup_escape as e

    if report.platform:
        out.print("\n[bold]Host platform[/]")
        for f in report.platform:
            style = "bold red" if f.gates_exit_code else "magenta"
            out.print(f"  [{style}]cannot run[/] on {e(f.gpu)}: {e(f.cause)}")
    if report.load:
        out.print("\n[bold]Will it load[/]")
        for (status, cause, fix), link in zip(load_lines(report), report.load, strict=True):
            gates = link.gates_exit_code and link.status == "fails"
            style = "bold red" if gates else "magenta"
            out.print(f"  [{style}]{e(status)}[/] {e(cause)}")
            out.print(f"    [dim]fix: {e(fix)}[/]")


def _where_the_time_went(report: ScanReport, elapsed: float) -> str:
    """Reading the files, the rest of the probe, the analysis here: each named, so a slow
    analysis is not blamed on the files."""
    files = f"{len(report.binaries)} native files"
    seconds = dict(report.seconds)
    if "binaries" not in seconds:  # an older probe: only the total is known
        return f"{files} read in {elapsed:.2f} s"
    from archgap.probe.collect import CONCURRENT  # these ran at the same time: the longest

    together = [v for k, v in seconds.items() if k in CONCURRENT]
    alone = [v for k, v in seconds.items() if k not in CONCURRENT | {"binaries", "analysis"}]
    probing = max(together, default=0.0) + sum(alone)
    return (
        f"{files} read in {seconds['binaries']:.2f} s, the rest of the probe "
        f"{probing:.2f} s, analysis {seconds.get('analysis', 0.0):.2f} s ({elapsed:.2f} s in all)"
    )
