"""A scan report as text, tables (package x GPU, library x GPU), Markdown, CSV and its JSON
document's body."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from archgap import __version__
from archgap.analysis.fixes.engine import numbering
from archgap.codec import encode
from archgap.report.table import VERDICT_STYLE, Cell, Column, Table, csv_text, markdown_lines
from archgap.report.table import markup_escape as e

if TYPE_CHECKING:
    from archgap.analysis.jit.findings import JitFinding
    from archgap.analysis.scan import ScanReport
    from archgap.analysis.verdicts.verdicts import LibraryVerdict
    from archgap.probe.facts import ToolchainFacts, Toolkit


def _gpu_columns(report: ScanReport) -> tuple[Column, ...]:
    return tuple(Column(g.label, str(g.compute_capability), "center") for g in report.gpus)


def package_table(report: ScanReport) -> Table:
    """One row per package, one verdict column per GPU."""
    cells = {(p.package, p.gpu): p for p in report.packages}
    packages = sorted({(p.package, p.version) for p in report.packages}, key=lambda k: k[0].lower())
    rows = []
    for name, version in packages:
        verdicts = [cells[(name, g.label)].verdict for g in report.gpus]
        rows.append(
            (
                Cell(name),
                Cell(version, "dim"),
                *(Cell(v, VERDICT_STYLE.get(v, "")) for v in verdicts),
            )
        )
    columns = (Column("package"), Column("version"), *_gpu_columns(report))
    return Table(columns, tuple(rows), keys=2, rule=True)


def library_table(report: ScanReport) -> Table:
    """One row per native library: the verdict per GPU and the entry that decides it."""
    rows: dict[tuple[str, str], dict[str, LibraryVerdict]] = {}
    for p in report.packages:
        for lib in p.libraries:
            rows.setdefault((lib.path, p.package), {})[p.gpu] = lib
    out = []
    for (path, package), by_gpu in sorted(rows.items()):
        verdicts = [by_gpu[g.label] for g in report.gpus]
        out.append(
            (
                Cell(_relative(path, report.environment.site_packages)),
                Cell(package, "dim"),
                Cell(verdicts[0].role if verdicts else "", "dim"),
                *(
                    Cell(
                        f"{v.verdict} {v.deciding_entry or ''}".strip(),
                        VERDICT_STYLE.get(v.verdict, ""),
                    )
                    for v in verdicts
                ),
            )
        )
    columns = (Column("library"), Column("package"), Column("role"), *_gpu_columns(report))
    return Table(columns, tuple(out), keys=2, rule=True)


def not_counted(report: ScanReport) -> list[str]:
    """Each file that does not count towards its package's verdict, with its role and why."""
    seen: dict[str, str] = {}
    for p in report.packages:
        for lib in p.libraries:
            if lib.role_reason:
                name = _relative(lib.path, report.environment.site_packages)
                seen.setdefault(name, f"{name}: {lib.role}: {lib.role_reason}")
    return list(seen.values())


def _relative(path: str, roots: tuple[str, ...] | list[str]) -> str:
    """A path relative to the site-packages directory that holds it (or the path itself)."""
    for root in roots:
        prefix = root.rstrip("/") + "/"
        if path.startswith(prefix):
            return path[len(prefix) :]
    return path


def findings(report: ScanReport) -> list[str]:
    """Every non-native verdict and JIT prediction, one sentence each."""
    lines = [
        f"{p.package} on {p.gpu}: {p.verdict} — {p.reason}"
        for p in report.packages
        if p.verdict != "native"
    ]
    lines += [note for p in report.packages for note in p.notes]
    lines += [f"cannot run on {f.gpu}: {f.cause}" for f in report.platform]
    lines += [f"{status} {cause}" for status, cause, _ in load_lines(report)]
    for f in report.jit:
        where = f" on {f.gpu} ({f.compute_capability})" if f.gpu else ""
        lines.append(f"JIT {f.status}: {f.package} {f.version}{where} — {f.cause}")
    return lines


_LOAD_STATUS = {"fails": "cannot load:", "note": "loads, note:"}  # else unknown


def load_lines(report: ScanReport) -> list[tuple[str, str, str]]:
    """Each broken link of the load model: (what it means, the cause, the fix)."""
    lines = []
    for f in report.load:
        status = _LOAD_STATUS.get(f.status, "unknown whether it loads:")
        where = f" on {f.gpu}" if f.gpu else ""
        lines.append((status, f"{f.cause}{where}", f"{f.fix} ({f.source})"))
    return lines


def gap_count(report: ScanReport) -> int:
    """What fails on a present or named GPU: packages, JIT builds, the platform, loading."""
    return (
        len(report.gaps) + len(report.jit_gaps) + len(report.platform_gaps)
        + len(report.load_gaps)
    )  # fmt: skip


def summary_line(report: ScanReport) -> str:
    gaps = gap_count(report)
    return (
        f"{gaps} gap(s) on a present or named GPU" if gaps else "no gap on a present or named GPU"
    )


def summary(report: ScanReport, elapsed: float) -> str:
    """One line for a dashboard: the verdict, the counts per verdict, what was judged."""
    counts: dict[str, int] = {}
    for p in report.packages:
        counts[p.verdict] = counts.get(p.verdict, 0) + 1
    order = ("native", "jit", "partial", "none", "blocked", "unknown")
    verdicts = ", ".join(f"{counts[v]} {v}" for v in order if counts.get(v))
    packages = len({p.package for p in report.packages})
    gpus = ", ".join(
        g.label if g.label == str(g.compute_capability) else f"{g.label} {g.compute_capability}"
        for g in report.gpus
    )
    jit = len(report.jit_gaps)
    return (
        f"archgap scan: {summary_line(report)} · {packages} packages x {len(report.gpus)} GPUs "
        f"({gpus}): {verdicts or 'no CUDA packages'}"
        + (f" · {jit} JIT failure(s)" if jit else "")
        + f" · {environment_label(report)}"
        + f" · {elapsed:.1f} s"
    )


def where(report: ScanReport) -> str:
    """`` on HOST`` for facts collected on another machine (every report names it)."""
    return f" on {report.target}" if report.target else ""


def environment_label(report: ScanReport) -> str:
    """``Python 3.12.3 /path/python``; for wheels judged before installing, their names; for
    images, their names and platforms."""
    env = report.environment
    if env.executable:
        return f"Python {env.python_version} {env.executable}{where(report)}"
    images = [f"{i.label} ({i.platform})" if i.platform else i.label for i in report.images]
    inside = tuple(i.label + "/" for i in report.images)
    wheels = [
        os.path.basename(p.rstrip("/")) for p in env.site_packages if not p.startswith(inside)
    ]
    parts = [("Image " if len(images) == 1 else "Images ") + ", ".join(images)] if images else []
    if wheels or not images:
        parts.append("Archives " + ", ".join(wheels))
    return "; ".join(parts)


def markdown(report: ScanReport, libs: bool) -> str:
    """Paste-ready for a GitHub issue: versions, GPUs, the table, the findings."""
    from archgap.report.table import markdown_escape as esc

    lines = ["### archgap scan", "", *_markdown_facts(report)]
    gpus = ", ".join(f"{g.label} ({g.compute_capability}, {g.role})" for g in report.gpus)
    lines.append(f"- judged on: {esc(gpus)}")
    lines += [f"- **{esc(summary_line(report))}**", ""]
    table = package_table(report)
    lines += (
        markdown_lines(table) if table.rows else ["No installed package carries CUDA device code."]
    )
    if libs:
        lines += ["", *markdown_lines(library_table(report))]
    notes = findings(report) + [f"{p.subject}: {p.reason}" for p in report.problems]
    if notes:
        lines += ["", "#### Findings", ""] + [f"- {esc(n)}" for n in notes]
    return "\n".join(lines) + "\n"


def _markdown_facts(report: ScanReport) -> list[str]:
    """The markdown's bullets of what was inspected: archgap, Python (or the environment not
    installed), the GPUs found and the toolkits that work."""
    from archgap.report.table import markdown_escape as esc

    env = report.environment
    facts = report.gpu_facts
    lines = [
        f"- archgap {__version__}",
        f"- Python {esc(env.python_version or '?')} (`{env.executable}`){esc(where(report))}"
        if env.executable
        else f"- {esc(environment_label(report))} (not installed)",
    ]
    if facts.gpus:
        driver = f", driver {facts.driver_version}" if facts.driver_version else ""
        lines.append(f"- GPUs: {len(facts.gpus)} found by {esc(facts.source)}{esc(driver)}")
    if report.toolchains is not None:
        tools = {
            f"{tk.tool or tk.component} {tk.full_version or tk.version}": None
            for tk in report.toolchains.toolkits
            if tk.status in ("ok", "wheel")
        }
        if tools:
            lines.append(f"- toolkits: {esc(', '.join(tools))}")
    return lines


def csv(report: ScanReport, libs: bool) -> str:
    """The package x GPU table (with ``libs``: the library x GPU table) as CSV."""
    return csv_text(library_table(report) if libs else package_table(report))


def body(report: ScanReport, elapsed: float) -> dict[str, Any]:
    """The body of the scan document (schema/scan.schema.json)."""
    env = report.environment
    return {
        **({"target": report.target} if report.target else {}),
        "python": {
            "executable": env.executable,
            "version": env.python_version,
            "site_packages": env.site_packages,
        },
        "gpu_facts": report.gpu_facts,
        "gpus": [
            {
                "label": g.label,
                "compute_capability": str(g.compute_capability),
                "role": g.role,
                "source": g.source,
            }
            for g in report.gpus
        ],
        "packages": report.packages,
        "files_scanned": len(report.binaries),
        "toolchains": _toolchains_body(report.toolchains),
        "jit": report.jit,
        "caches": report.caches,
        "platform": report.platform,
        "load": report.load,
        "images": report.images,
        "driver": {"version": report.driver, "source": report.driver_source},
        "strict": report.strict,
        "gap": report.has_gap,
        "problems": report.problems,
        "seconds": round(elapsed, 3),
    }


def _toolchains_body(facts: ToolchainFacts | None) -> dict[str, Any] | None:
    """What JIT resolution saw; packages and site-packages are left out (in "python" already)."""
    if facts is None:
        return None
    return {
        "env_source": facts.env_source,
        "env": encode(facts.env),
        "which_nvcc": facts.which_nvcc,
        "toolkits": encode(facts.toolkits),
        "source_checks": encode(facts.source_checks),
        "problems": encode(facts.problems),
    }


# --- the text report (rich markup lines and the tables between them) ---------------------------


def text(
    report: ScanReport,
    libs: bool,
    elapsed: float,
    python_source: str = "",
    quiet: bool = False,
    verbose: bool = False,
) -> list[str | Table]:
    """The text report: rich-markup lines, and the package (and with ``libs`` the library)
    table where they go (the CLI fits a table to the terminal). ``python_source``: why this
    interpreter was inspected; ``quiet``: no problems listed. Without ``verbose`` (-v) it fits a
    screen: a reason shared by several GPUs or packages is one line, a JIT failure's evidence is
    folded (counted) under its fixes; ``verbose`` gives every finding and fact its own line."""
    from archgap.report.caches import cache_lines

    lines: list[str | Table] = [*_environment_lines(report, python_source), *_gpu_lines(report)]
    for problem in () if quiet else report.problems:
        lines.append(f"[magenta]![/] {e(problem.subject)}: {e(problem.reason)}")
    lines += _tables(report, libs)
    lines += _why_lines(report, verbose)
    lines += _platform_and_load_lines(report, verbose)
    if report.toolchains is not None:
        lines += _toolkit_lines(report.toolchains)
    lines += _jit_lines(report, verbose)
    if report.caches is not None:
        lines.append("\n".join(cache_lines(report.caches)))
    gaps = gap_count(report)
    verdict = (
        f"[bold red]{gaps} gap(s)[/] on a present or named GPU"
        if gaps
        else "[green]no gap[/] on a present or named GPU"
    )
    lines.append(f"\n{verdict} · {_where_the_time_went(report, elapsed)}")
    return lines


def _gpu_lines(report: ScanReport) -> list[str]:
    """The GPUs found (by what, with which driver), or that none was: the default matrix."""
    facts = report.gpu_facts
    if facts.gpus:
        driver = f", driver {facts.driver_version}" if facts.driver_version else ""
        return [f"[bold]GPUs[/] {len(facts.gpus)} found by {facts.source}{driver}"]
    if any(g.role == "matrix" for g in report.gpus):
        return ["[bold]GPUs[/] none found, none named: the default matrix (information only)"]
    return []


def _tables(report: ScanReport, libs: bool) -> list[str | Table]:
    """The package table (or that no package carries device code); with ``libs`` the library
    table and the libraries not counted."""
    table = package_table(report)
    lines: list[str | Table] = [
        table if table.rows else "No installed package carries CUDA device code."
    ]
    if not (libs and table.rows):
        return lines
    lines += ["", library_table(report)]
    uncounted = not_counted(report)
    if uncounted:
        lines.append("[bold]Not counted[/] (only kernel libraries decide a package's verdict)")
        lines += [f"  [dim]{e(line)}[/]" for line in uncounted]
    return lines


def _why_lines(report: ScanReport, verbose: bool) -> list[str]:
    """Why each package is not native (or has notes): with ``verbose`` one line per package and
    GPU, else one per reason shared by several GPUs or packages."""
    from archgap.report.grouping import verdict_groups

    notes = [p for p in report.packages if p.verdict != "native" or p.notes]
    if not notes:
        return []
    lines = ["\n[bold]Why[/]"]
    for p in notes if verbose else ():
        style = VERDICT_STYLE.get(p.verdict, "default")
        lines.append(f"  {e(p.package)} on {e(p.gpu)}: [{style}]{p.verdict}[/] — {e(p.reason)}")
        lines += [f"    [dim]{e(note)}[/]" for note in p.notes]
    for g in () if verbose else verdict_groups(report, notes):
        style = VERDICT_STYLE.get(g.verdict, "default")
        where = e(g.where(len(report.gpus)))
        lines.append(f"  {e(g.package)} {where}: [{style}]{g.verdict}[/] — {e(g.reason)}")
        lines += [f"    [dim]{e(note)}[/]" for note in g.notes]
    return lines


def _environment_lines(report: ScanReport, python_source: str) -> list[str]:
    """What was judged: the interpreter, or the archives and images (with their Python)."""
    env = report.environment
    source = f" [dim]({e(python_source)})[/]" if python_source else ""
    if env.executable:
        version = env.python_version or "?"
        return [f"[bold]Python[/] {e(env.executable)} ({version}){e(where(report))}{source}"]
    head, _, names = environment_label(report).partition(" ")
    checks = (
        "no toolchain or JIT checks"
        if report.toolchains is None
        else "JIT packages judged with the toolchain below"
    )
    lines = [f"[bold]{head}[/] {e(names)} (not installed; {checks})"]
    for image in report.images:
        for site in image.sites:
            lines.append(f"  Python {site.python_version} {e(site.path)} ({site.kind})")
    return lines


def _platform_and_load_lines(report: ScanReport, verbose: bool = True) -> list[str]:
    """What stops the environment from running at all: the host's CPU, a broken load link
    (without ``verbose``, one entry for the packages a check fails alike, with one fix)."""
    from archgap.report.grouping import load_groups

    lines = []
    if report.platform:
        lines.append("\n[bold]Host platform[/]")
        for f in report.platform:
            style = "bold red" if f.gates_exit_code else "magenta"
            lines.append(f"  [{style}]cannot run[/] on {e(f.gpu)}: {e(f.cause)}")
    if report.load and not verbose:
        lines.append("\n[bold]Will it load[/]")
        for group in load_groups(report):
            status = _LOAD_STATUS.get(group.status, "unknown whether it loads:")
            style = "bold red" if group.gates else "magenta"
            lines.append(f"  [{style}]{e(status)}[/] {e(group.cause)}")
            lines.append(f"    [dim]fix: {e(group.fix)}[/]")
    elif report.load:
        lines.append("\n[bold]Will it load[/]")
        for (status, cause, fix), link in zip(load_lines(report), report.load, strict=True):
            gates = link.gates_exit_code and link.status == "fails"
            style = "bold red" if gates else "magenta"
            lines.append(f"  [{style}]{e(status)}[/] {e(cause)}")
            lines.append(f"    [dim]fix: {e(fix)}[/]")
    return lines


def _toolkit_lines(toolchains: ToolchainFacts) -> list[str]:
    """One line per distinct tool (several lookups often reach the same nvcc)."""
    found_by: dict[str, list[str]] = {}
    first: dict[str, Toolkit] = {}
    for tk in toolchains.toolkits:
        if tk.status == "missing":
            continue
        key = f"{tk.real_home or tk.home}:{tk.tool}:{tk.component}"
        found_by.setdefault(key, []).append(tk.found_by)
        first.setdefault(key, tk)
    if not first:
        return []
    lines = [f"[bold]Toolkits[/] (environment: {e(toolchains.env_source)})"]
    for key, tk in first.items():
        name = tk.tool or f"{tk.component or 'toolkit'} wheel"
        version = tk.full_version or tk.version or "?"
        state = (
            ""
            if tk.status in ("ok", "wheel")
            else f" [magenta]{tk.status}: {e(tk.reason or '')}[/]"
        )
        via = ", ".join(dict.fromkeys(found_by[key]))
        lines.append(
            f"  {e(name)} {e(version)}{state} [dim]{e(tk.tool_path or tk.home)} ({e(via)})[/]"
        )
    return lines


def _jit_lines(report: ScanReport, verbose: bool = True) -> list[str]:
    """What each JIT compiler will do: one line when it works, else its error, cause, fixes (the
    fix engine's ranking) and the chain of facts (each with its source; without ``verbose``
    counted on one line)."""
    if not report.jit:
        return []
    lines = ["\n[bold]JIT compilers[/]"]
    # One numbering with explain and fix: the report's gaps' fixes first (fix plans for those).
    numbers = numbering(fix for g in report.jit_gaps for fix in g.fixes)
    for key in numbering(fix for f in report.jit for fix in f.fixes):
        numbers.setdefault(key, len(numbers) + 1)
    for f in report.jit:
        lines += _jit_finding(f, numbers, verbose)
    return lines


def _jit_finding(f: JitFinding, numbers: dict[tuple[str, str], int], verbose: bool) -> list[str]:
    """One JIT finding: ok in one line, else its status, error, cause, numbered fixes and its
    chain of facts (without ``verbose`` counted on one line)."""
    style = {"fails": "bold red", "ok": "green"}.get(f.status, "magenta")
    if f.status == "ok":  # checked and works: one line
        return [f"  [{style}]ok[/] {e(f.cause)}"]
    where = f" on {f.gpu} ({f.compute_capability})" if f.gpu else ""
    lines = [f"  [{style}]{f.status}[/] {e(f.package)} {e(f.version)}{e(where)} — {e(f.when)}"]
    if f.error:
        lines.append(f"    [bold]error:[/] {e(f.error)}")
    lines.append(f"    [bold]cause:[/] {e(f.cause)}")
    for fix in sorted(f.fixes, key=lambda x: numbers[(x.kind, x.action)]):
        lines.append(f"    [green]fix {numbers[(fix.kind, fix.action)]}:[/] {e(fix.action)}")
        if fix.command:
            lines.append(f"           $ {e(fix.command)}")
        lines += [f"           {e(name)}={e(value)}" for name, value in fix.env]
        lines.append(f"           [dim]{e(fix.tradeoff)}[/]")
    if verbose and f.chain:
        lines.append("    [bold]evidence:[/]")
        lines += [f"      · {e(fact.what)} [dim]← {e(fact.source)}[/]" for fact in f.chain]
    elif f.chain:
        lines.append(
            f"    [dim]evidence: {len(f.chain)} facts, each with where it was read "
            "(installed source, nvcc, the knowledge base): -v shows them[/]"
        )
    return lines


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
