"""The explain report: the diagnosis of a log and what of the log was read, as the JSON document's
body and as rich-markup text lines."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from archgap.codec import encode
from archgap.report.markup import escape

if TYPE_CHECKING:
    from archgap.analysis.explain.diagnosis import Diagnosis


def body(
    diagnosis: Diagnosis,
    origin: str,
    lines: int,
    truncated_lines: int,
    skipped: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The body of the explain document (schema/explain.schema.json): the diagnosis and its
    input (where the log came from, its lines, and the middle not read of a very long log:
    ``skipped`` bytes and lines, when there are any)."""
    data: dict[str, Any] = encode(diagnosis)
    data["input"] = {"origin": origin, "lines": lines, "truncated_lines": truncated_lines}
    if skipped and skipped.get("bytes"):
        data["input"]["skipped"] = skipped
    return {"explain": data}


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
    lines = ["\n[bold]chain[/]"]
    for number, step in enumerate(diagnosis.steps, start=1):
        location = f" [bold]{escape(step.location)}[/]" if step.location else ""
        lines.append(f" {number:>2}. {escape(step.text)}{location}  {_STATUS_LABEL[step.status]}")
        if step.fact and verbose:
            lines.append(f"     [dim]{escape(step.fact)}[/]")
        if verbose or number == 1:
            lines.append(f"     [dim]source: {escape(step.source)}[/]")
    if diagnosis.steps and not verbose:
        lines.append("     [dim](-v: each step's line of code or log and where it was read)[/]")
    label = _CAUSE_LABEL.get(diagnosis.cause_status, "")
    lines.append(f"\n[bold]root cause[/]{label} {escape(diagnosis.root_cause)}")
    for case in diagnosis.cases:  # a conditional cause: one bullet per case
        cause = f" {escape(case.cause)}" if case.cause else ""  # "": the cause is the same
        lines.append(f"  - {escape(case.when)}:{cause}")
        lines += [f"      fix: {escape(text)}" for text in case.fixes]
    if diagnosis.decide:
        lines.append("\n[bold]what would decide it[/]")
        lines += [f"  - {escape(item)}" for item in diagnosis.decide]
    if diagnosis.fixes:
        lines.append("\n[bold]fixes[/] (least invasive first)")
        for number, fix in enumerate(diagnosis.fixes, start=1):
            lines.append(f" {number}. {escape('[' + fix.kind + ']')} {escape(fix.text)}")
            lines.append(f"    [dim]{escape(fix.source)}[/]")
    return lines


def text(
    diagnosis: Diagnosis, origin: str, lines: int, note: str = "", verbose: bool = True
) -> list[str]:
    """The text report (rich-markup lines): what was read and examined, then the error and its
    chain, or what the log states when no signature matched; ``note`` last (a log not read
    whole). Without ``verbose`` (-v) each step of the chain is one line, so the story fits a
    screen."""
    where = escape(diagnosis.environment or "no environment (log only)")
    if diagnosis.environment_reason:  # archgap chose it: say why
        reason = escape(diagnosis.environment_reason)
        where = f"{where[:-1]}; {reason})" if where.endswith(")") else f"{where} ({reason})"
    plural = "line" if lines == 1 else "lines"
    out = [f"[bold]archgap explain[/] {escape(origin)} ({lines} {plural}) — examined: {where}"]
    if diagnosis.status == "not-architecture":
        out.append(
            f"\n[bold yellow]not an architecture gap[/] {escape(diagnosis.error)}  "
            f"[dim]({diagnosis.signature})[/]"
        )
        out += [f"  {escape(n)}" for n in diagnosis.notes]
    elif diagnosis.status != "diagnosed":
        out += _unrecognised(diagnosis)
    else:
        first = next_step(diagnosis)
        if first:
            out.append(f"[bold]next:[/] {escape(first)}")
        out.append(
            f"\n[bold red]error[/] {escape(diagnosis.error)}  [dim]({diagnosis.signature})[/]"
        )
        if diagnosis.tool:
            out.append(f"  raised by {escape(diagnosis.tool)}")
        out += [f"\n[bold yellow]note[/] {escape(n)}" for n in diagnosis.notes]
        out += _chain(diagnosis, verbose)
    if note:
        out.append(f"\n[bold yellow]note[/] {escape(note)}")
    return out
