"""A scan report as tables (package x GPU, library x GPU), Markdown and CSV."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from archgap import __version__
from archgap.codec import encode
from archgap.report.table import VERDICT_STYLE, Cell, Column, Table, csv_text, markdown_lines

if TYPE_CHECKING:
    from archgap.analysis.scan import ScanReport
    from archgap.analysis.verdicts import LibraryVerdict
    from archgap.probe.facts import ToolchainFacts


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


def load_lines(report: ScanReport) -> list[tuple[str, str, str]]:
    """Each broken link of the load model: (what it means, the cause, the fix)."""
    lines = []
    for f in report.load:
        status = "cannot load:" if f.status == "fails" else "unknown whether it loads:"
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
    order = ("native", "jit", "partial", "none", "unknown")
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

    env = report.environment
    facts = report.gpu_facts
    lines = [
        "### archgap scan",
        "",
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
