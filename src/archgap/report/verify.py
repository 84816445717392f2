"""The verify report (``api.verify``) as text and as its JSON document's body; a disagreement
with the driver as the Markdown issue to file."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from archgap.analysis.verdicts.verdicts import UNOWNED
from archgap.codec import encode
from archgap.probe.binary.deep_plan import runtime_entries
from archgap.report.markup import escape
from archgap.report.table import VERDICT_STYLE

if TYPE_CHECKING:
    from archgap.analysis.verify import Attempt, Check, Disagreement, VerifyReport
    from archgap.probe.facts import BinaryFacts


def body(report: VerifyReport) -> dict[str, Any]:
    return {
        "driver": {
            "library": report.driver_library,
            "cuda_version": report.driver_cuda,
            "driver_version": report.driver_version,
            "ptx_isa": report.driver_ptx_isa,
            "error": report.error,
        },
        "gpus": report.gpus,
        "checks": [dict(_check_json(c)) for c in report.checks],
        "agreements": report.agreements,
        "settled": len(report.settled),
        "disagreements": [
            {**encode(d), "report": bug_report(d, report)} for d in report.disagreements
        ],
        "load_failures": sum(1 for c in report.checks if c.load_failure),
        "skipped": [{"path": p, "reason": r} for p, r in report.skipped],
        "problems": [{"subject": s, "reason": r} for s, r in report.problems],
    }


def _check_json(check: Check) -> dict[str, Any]:
    data: dict[str, Any] = encode(check)
    data.update(agrees=check.agrees if check.settled else None, load_failure=check.load_failure)
    return data


def _observed(check: Check) -> str:
    empty = f", {check.empty} with nothing for this GPU" if check.empty else ""
    counted = f"{check.loaded}/{check.images} containers{empty}"
    if check.observed == "native":
        functions = "" if check.functions is None else f", {check.functions} functions"
        return f"{check.target} loaded ({counted}{functions})"
    if check.observed == "jit":
        jit = f"driver JIT {check.jit_ms:.1f} ms, " if check.jit_ms is not None else ""
        return f"{check.target} JIT-compiled ({counted}; {jit}{check.seconds * 1000:.1f} ms wall)"
    return check.observation


def _check_line(check: Check) -> str:
    name = escape(check.path.rsplit("/", 1)[-1])
    style = VERDICT_STYLE.get(check.observed, "")
    if not check.settled:
        mark = "[magenta]unsettled[/]"
    elif check.agrees:
        mark = "[green]agree[/]   "
    else:
        mark = "[bold red]DISAGREE[/]"
    predicted = "" if check.agrees else f" (scan: {check.predicted})"
    line = f"  {mark} [{style}]{check.observed}[/]{predicted} {name} — {escape(_observed(check))}"
    for failure in check.failures:
        why = failure.error or failure.error_log or "not loaded"
        line += f"\n      [bold red]not loaded:[/] {escape(failure.image)}: {escape(why)}"
    return line


def text(report: VerifyReport) -> list[str]:
    driver = f"CUDA {report.driver_cuda}" if report.driver_cuda else "CUDA ?"
    if report.driver_version:
        driver += f", driver {report.driver_version}"
    lines = [f"[bold]Driver[/] {escape(report.driver_library)} ({escape(driver)})"]
    if report.error:
        lines.append(f"[bold red]no GPU to verify on:[/] {escape(report.error)}")
    for subject, reason in report.problems:
        lines.append(f"[magenta]![/] {escape(subject)}: {escape(reason)}")
    for gpu in report.gpus:
        checks = [c for c in report.checks if c.gpu_index == gpu.index]
        lines.append(
            f"\n[bold]GPU {gpu.index}[/] {escape(gpu.name)} ({gpu.compute_capability}) — "
            f"{len(checks)} libraries in {gpu.seconds:.2f} s"
        )
        if gpu.error:
            lines.append(f"  [bold red]{escape(gpu.status)}:[/] {escape(gpu.error)}")
        lines += [_check_line(c) for c in checks]
    for path, reason in report.skipped:
        lines.append(f"[dim]skipped {escape(path)}: {escape(reason)}[/]")
    for bug in report.disagreements:
        lines += ["", "[bold red]A bug in archgap's rules[/] (ready to file):"]
        lines += [escape(line) for line in bug_report(bug, report).splitlines()]
    settled = len(report.settled)
    failures = sum(1 for c in report.checks if c.load_failure)
    lines.append(
        f"\n[bold]{report.agreements} of {settled}[/] predictions agree with the driver"
        f" · {len(report.disagreements)} disagreements · {failures} load failures"
    )
    return lines


def _entries_text(binary: BinaryFacts | None) -> str:
    if binary is None:
        return "(not read)"
    targets: dict[str, int] = {}
    for entry in runtime_entries(binary):
        where = "" if entry.listed else f" [{entry.section}, not listed by cuobjdump]"
        name = f"{entry.target}{f' (PTX ISA {entry.ptx_isa})' if entry.ptx_isa else ''}{where}"
        targets[name] = targets.get(name, 0) + 1
    return ", ".join(f"{name} x{n}" if n > 1 else name for name, n in targets.items())


def _attempt_lines(attempts: tuple[Attempt, ...]) -> list[str]:
    """Each image the driver was given, what it did, and the first line of each of its logs."""
    lines = []
    for attempt in attempts:
        result = "loaded" if attempt.ok else f"{attempt.error or 'not loaded'}"
        lines.append(f"  - {attempt.image}: {result}")
        for log in (attempt.error_log, attempt.info_log):
            if log:
                lines.append(f"    `{log.splitlines()[0][:300]}`")
    return lines


def bug_report(bug: Disagreement, report: VerifyReport) -> str:
    """A Markdown issue body: what archgap predicted, what the driver did, and on what."""
    from archgap import __version__

    check = next(c for c in report.checks if (c.path, c.gpu_index) == (bug.path, bug.gpu_index))
    gpu = next((g for g in report.gpus if g.index == check.gpu_index), None)
    gpu_text = f"{gpu.name}, compute capability {gpu.compute_capability}" if gpu else "?"
    binary = next((b for b in report.binaries if b.path == check.path), None)
    owner = (
        f"package {check.package} {check.version}".rstrip()
        if check.package != UNOWNED
        else "no installed distribution owns it"
    )
    driver = f"CUDA {report.driver_cuda or '?'} (cuDriverGetVersion)"
    if report.driver_version:
        driver += f", driver {report.driver_version}"
    lines = [
        f"### archgap {__version__}: scan predicts `{check.predicted}`, "
        f"the driver did `{check.observed}`",
        "",
        f"- file: `{check.path}` ({binary.size if binary else '?'} bytes; {owner})",
        f"- entries: {_entries_text(binary)}",
        f"- GPU: {gpu_text} (GPU {check.gpu_index})",
        f"- driver: {driver}; PTX ISA assumed by the scan: {report.driver_ptx_isa or 'unknown'}",
        f"- scan's rule: {check.prediction}",
        f"- driver: {check.observation}",
    ]
    lines += _attempt_lines(check.attempts + check.failures)
    lines += ["", f"Reproduce: `archgap verify {check.path} --gpu-index {check.gpu_index} --json`"]
    return "\n".join(lines)
