"""The explain report: the diagnosis of a log and what of the log was read, as the JSON document's
body and as rich-markup text lines."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from archgap.codec import encode
from archgap.report.jsondoc import document as envelope
from archgap.report.markup import escape

if TYPE_CHECKING:
    from archgap.analysis.explain.diagnosis import Diagnosis
    from archgap.results import ExplainResult


def body(result: ExplainResult) -> dict[str, Any]:
    """The body of the explain document (schema/explain.schema.json): the diagnosis and its
    input (where the log came from, its lines, and the middle not read of a very long log:
    ``skipped`` bytes and lines, when there are any)."""
    data: dict[str, Any] = encode(result.diagnosis)
    data["input"] = {
        "origin": result.origin,
        "lines": result.lines,
        "truncated_lines": result.truncated_lines,
    }
    if result.skipped_bytes:
        data["input"]["skipped"] = {"bytes": result.skipped_bytes, "lines": result.skipped_lines}
    return {"explain": data}


def document(result: ExplainResult) -> dict[str, Any]:
    """What ``archgap explain --json`` prints (and the MCP tool returns): the versioned
    envelope around ``body``."""
    return envelope("explain", body(result))


_STATUS_LABEL = {
    "confirmed": "[green]confirmed[/]",
    "from-log": "[cyan]from log[/]",
    "knowledge": "[yellow]knowledge base[/]",
    "unconfirmed": "[red]unconfirmed[/]",
}
_CAUSE_LABEL = {
    "conditional": " [yellow](conditional)[/]",
    "undetermined": " [red](not determined for this version)[/]",
}


def next_step(diagnosis: Diagnosis) -> str:
    """What to do first, for the first lines: the first fix whenever what is still open cannot
    change it; the fact that decides only when it would (``question_open``)."""
    if diagnosis.decide and question_open(diagnosis):
        return f"find out {diagnosis.decide[0]}"
    if diagnosis.fixes:
        return diagnosis.fixes[0].text
    return "nothing to fix (see the root cause)" if diagnosis.root_cause else ""


_PLACEHOLDERS = ("<CC>", "<SM>")  # a fix written for no known GPU (causes.placeholder_legend)


def question_open(diagnosis: Diagnosis) -> bool:
    """Whether the fact the diagnosis asks for (``decide``) changes what to do first: there is
    no fix, the first fix needs the GPU filled in, or the cases (one per value of the fact) do
    not all begin with the same fix. A case with no fix of its own takes the diagnosis' fixes.
    Otherwise the log and the examined environment settle the first step, and the fact only
    confirms it."""
    if not diagnosis.fixes:
        return True
    first = diagnosis.fixes[0].text
    if any(p in first for p in _PLACEHOLDERS):
        return True
    firsts = {_bare(case.fixes[0]) if case.fixes else first for case in diagnosis.cases}
    return bool(firsts - {first})


def _bare(fix: str) -> str:
    """A case's fix without the kind some cases lead with ("[upgrade] install ...")."""
    if fix.startswith("[") and "] " in fix:
        return fix.split("] ", 1)[1]
    return fix


def _unrecognised(diagnosis: Diagnosis) -> list[str]:
    """No signature matched: what the log states, for a person to go on."""
    label = "unknown error" if diagnosis.status == "unknown" else "no error found"
    lines = [f"\n[bold yellow]{label}[/]: no known architecture-gap signature matches."]
    rec = diagnosis.recognised
    if rec.error:
        lines.append(f"  last error: {escape(rec.error)}")
    for label, values in (
        ("GPUs", rec.gpus),
        ("compute capabilities", rec.compute_capabilities),
        ("versions", tuple(f"{k} {v}" for k, v in rec.versions)),
        ("paths", tuple(f"{k}={v}" for k, v in rec.paths)),
        ("frames", rec.frames[-5:]),
    ):
        if values:
            lines.append(f"  {label}: {escape(', '.join(values))}")
    return lines


def _chain(diagnosis: Diagnosis, verbose: bool = True) -> list[str]:
    """A diagnosed error: the chain of causes (without ``verbose``, one line a step: the code
    line and the source of each are folded, but for the error's own place in the log), the root
    cause (each case of a conditional one), what would decide it, and the fixes."""
    lines = ["\n[bold]chain[/]", *_steps(diagnosis, verbose)]
    label = _CAUSE_LABEL.get(diagnosis.cause_status, "")
    lines.append(f"\n[bold]root cause[/]{label} {escape(diagnosis.root_cause)}")
    for case in diagnosis.cases:  # a conditional cause: one bullet per case
        cause = f" {escape(case.cause)}" if case.cause else ""  # "": the cause is the same
        lines.append(f"  - {escape(case.when)}:{cause}")
        lines += [f"      fix: {escape(text)}" for text in case.fixes]
    if diagnosis.decide:
        lines.append("\n[bold]what would decide it[/]")
        lines += [f"  - {escape(item)}" for item in diagnosis.decide]
    return lines + _fixes(diagnosis)


def _steps(diagnosis: Diagnosis, verbose: bool) -> list[str]:
    """The chain's steps, numbered, each with its status (and with ``verbose`` its fact and
    source; without, only the first step's source, and a line that says how to see them)."""
    lines = []
    for number, step in enumerate(diagnosis.steps, start=1):
        location = f" [bold]{escape(step.location)}[/]" if step.location else ""
        lines.append(f" {number:>2}. {escape(step.text)}{location}  {_STATUS_LABEL[step.status]}")
        if step.fact and verbose:
            lines.append(f"     [dim]{escape(step.fact)}[/]")
        if verbose or number == 1:
            lines.append(f"     [dim]source: {escape(step.source)}[/]")
    if diagnosis.steps and not verbose:
        lines.append("     [dim](-v: each step's line of code or log and where it was read)[/]")
    return lines


def _fixes(diagnosis: Diagnosis) -> list[str]:
    """The fixes, least invasive first, each with its source ([] when there are none)."""
    if not diagnosis.fixes:
        return []
    lines = ["\n[bold]fixes[/] (least invasive first)"]
    for number, fix in enumerate(diagnosis.fixes, start=1):
        lines.append(f" {number}. {escape('[' + fix.kind + ']')} {escape(fix.text)}")
        lines.append(f"    [dim]{escape(fix.source)}[/]")
    return lines


def text(result: ExplainResult, verbose: bool = True) -> list[str]:
    """The text report (rich-markup lines): what was read and examined, then the error and its
    chain, or what the log states when no signature matched; the note on a log not read whole
    last. Without ``verbose`` (-v) each step of the chain is one line, so the story fits a
    screen."""
    diagnosis = result.diagnosis
    where = escape(diagnosis.environment or "no environment (log only)")
    if diagnosis.environment_reason:  # archgap chose it: say why
        reason = escape(diagnosis.environment_reason)
        where = f"{where[:-1]}; {reason})" if where.endswith(")") else f"{where} ({reason})"
    plural = "line" if result.lines == 1 else "lines"
    out = [
        f"[bold]archgap explain[/] {escape(result.origin)} ({result.lines} {plural}) — "
        f"examined: {where}"
    ]
    if diagnosis.status == "not-architecture":
        out.append(
            f"\n[bold yellow]not an architecture gap[/] {escape(diagnosis.error)}  "
            f"[dim]({diagnosis.signature})[/]"
        )
        out += [f"  {escape(n)}" for n in diagnosis.notes]
    elif diagnosis.status != "diagnosed":
        out += _unrecognised(diagnosis)
    else:
        out += _diagnosed(diagnosis, verbose)
    if result.note:
        out.append(f"\n[bold yellow]note[/] {escape(result.note)}")
    return out


def _diagnosed(diagnosis: Diagnosis, verbose: bool) -> list[str]:
    """A diagnosed error: the next step first, the error and what raised it, the notes, the
    chain."""
    first = next_step(diagnosis)
    out = [f"[bold]next:[/] {escape(first)}"] if first else []
    out.append(f"\n[bold red]error[/] {escape(diagnosis.error)}  [dim]({diagnosis.signature})[/]")
    if diagnosis.tool:
        out.append(f"  raised by {escape(diagnosis.tool)}")
    out += [f"\n[bold yellow]note[/] {escape(n)}" for n in diagnosis.notes]
    return out + _chain(diagnosis, verbose)
