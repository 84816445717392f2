"""What `trace` shows: the occurrences outside vendored, example and test trees (unless --all),
with what was left out counted per tree."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from archgap.analysis.trees import left_out_sentence, relative_path
from archgap.report.markup import escape, short_path
from archgap.report.table import Cell, Column, Table, markdown_escape, markdown_lines

if TYPE_CHECKING:
    from archgap.analysis.source_shown import TraceLeftOut
    from archgap.analysis.verdicts.compat import GpuTarget
    from archgap.probe.facts import EnvVar, Frame, Guard, Occurrence, Swallow, TraceFacts
    from archgap.results import TraceResult


def left_out_text(left: TraceLeftOut) -> str:
    return left_out_sentence(left.occurrences, f"occurrences in {left.files} files", left.trees)


def table(facts: TraceFacts) -> Table:
    """One row per occurrence: writes first, as the text shows them."""
    root = facts.roots[0] if len(facts.roots) == 1 else ""
    rows = tuple(
        tuple(
            Cell(t)
            for t in (
                o.kind,
                f"{relative_path(o.path, root)}:{o.line}",
                o.function,
                o.form,
                o.text,
                " / ".join(f"{g.kind} {g.condition}".strip() for g in o.branch),
            )
        )
        for o in facts.occurrences
    )
    columns = (
        Column("kind"),
        Column("where", code=True),
        Column("function", code=True),
        Column("form"),
        Column("code", code=True),
        Column("branch", code=True),
    )
    return Table(columns, rows, keys=0)


def findings(facts: TraceFacts) -> list[str]:
    """Each broad except around a write, with what it hides."""
    root = facts.roots[0] if len(facts.roots) == 1 else ""
    lines = []
    for o in facts.occurrences:
        for swallow in o.swallowed:
            hidden = "; ".join(
                f"{r.exception}({r.message!r}) raised at {relative_path(r.path, root)}:{r.line}"
                for r in swallow.raisers
            )
            where = f"{relative_path(o.path, root)}:{o.line}"
            lines.append(
                f"the write at {where} sits in a try whose {swallow.handler!r} (line "
                f"{swallow.except_line}) only does {swallow.action!r}"
                + (f"; it hides {hidden}" if hidden else "")
            )
    return list(dict.fromkeys(lines))


def markdown(facts: TraceFacts, left: TraceLeftOut) -> str:
    from archgap import __version__

    writes = sum(o.kind == "write" for o in facts.occurrences)
    lines = [
        f"### archgap trace {markdown_escape(facts.name)}",
        "",
        f"archgap {__version__}; {writes} writes, {len(facts.occurrences) - writes} reads "
        f"({facts.files_scanned} .py files scanned)",
        "",
        *markdown_lines(table(facts)),
    ]
    notes = findings(facts)
    if notes:
        lines += ["", "#### Swallowed exceptions", "", *(f"- {markdown_escape(n)}" for n in notes)]
    if left.occurrences:
        lines += ["", markdown_escape(left_out_text(left))]
    return "\n".join(lines) + "\n"


# --- the trace result (api.trace), in each format ----------------------------------------------


def document(result: TraceResult) -> dict[str, Any]:
    """The trace document (``archgap trace --json``)."""
    from archgap.report.jsondoc import document as envelope
    from archgap.report.jsondoc import shown_body

    return envelope("trace", shown_body("trace", result.facts, result.left))


def markdown_of(result: TraceResult) -> str:
    return markdown(result.facts, result.left)


def csv_of(result: TraceResult) -> str:
    from archgap.report.table import csv_text

    return csv_text(table(result.facts))


def text(result: TraceResult) -> list[str]:
    """Rich-markup lines: the writes (defining module first, each with its branch, the
    variables feeding it and the exceptions swallowed around it), the reads, what could not be
    read, what was left out."""
    lines: list[str] = []
    context = _Context(result.gpus, result.env, result.env_source)
    if result.env is not None:
        lines.append(f"[bold]Environment[/] {escape(result.env_source)} (--env-from)")
    _render(result.facts, lines, context)
    writes = [o for o in result.facts.occurrences if o.kind == "write"]
    if result.gpus and writes and not any(_on_gpus(o, context) for o in writes):
        gpus = ", ".join(f"{g.label} ({g.compute_capability})" for g in result.gpus)
        lines.append(f"[dim]no write's branch depends on the compute capability of {gpus}[/]")
    note = left_out_text(result.left)
    return lines + ([f"[dim]{escape(note)}[/]"] if note else [])


def short_function(frame: Frame) -> str:
    return frame.function.rsplit(".", 1)[-1] if "." in frame.function else frame.function


def guards_text(guards: tuple[Guard, ...]) -> str:
    parts = []
    for guard in guards:
        if guard.kind in ("if", "while"):
            parts.append(f"{guard.kind} {guard.condition}")
        elif guard.kind == "else":
            parts.append(f"else of ({guard.condition})")
        elif guard.kind == "for":
            parts.append(f"for {guard.condition}")
        elif guard.kind == "except":
            parts.append(f"except {guard.condition}".rstrip())
        else:
            parts.append(f"{guard.kind} (line {guard.line})")
    return " › ".join(parts)


@dataclass(frozen=True)
class _Context:
    """What --gpu and --env-from add: the GPUs each branch is evaluated for, the service's
    environment each variable feeding a write is looked up in (None: not asked)."""

    gpus: tuple[GpuTarget, ...] = ()
    env: tuple[EnvVar, ...] | None = None
    env_source: str = ""


def _on_gpus(item: Occurrence, context: _Context) -> list[str]:
    """Per GPU: whether the write's branch is taken on it (or on what else that depends)."""
    from archgap.analysis.gpu_conditions import reach

    guards = [(g.kind, g.condition) for g in item.branch]
    out = []
    for gpu in context.gpus:
        reached, unless = reach(guards, gpu.compute_capability)
        name = f"{gpu.label} ({gpu.compute_capability})"
        if reached is True:
            out.append(f"on {name}: taken")
        elif reached is False:
            out.append(f"on {name}: not taken")
        elif len(unless) < len(guards):
            out.append(f"on {name}: taken when {' and '.join(unless)}")
    return out  # a branch the compute capability does not decide: nothing to say per GPU


def _env_state(variable: str, context: _Context) -> str:
    """Whether the service's environment sets ``variable`` ("" without --env-from)."""
    from archgap.probe.environment.envvars import env_allowed

    if context.env is None:
        return ""
    for var in context.env:
        if var.name == variable:
            return f"set in {context.env_source}: {variable}={var.value}"
    if not env_allowed(variable):
        return "not read: archgap reads only its allowlist of variables (never secrets)"
    return f"not set in {context.env_source}"


def _render(facts: TraceFacts, lines: list[str], context: _Context = _Context()) -> None:
    writes = [o for o in facts.occurrences if o.kind == "write"]
    reads = [o for o in facts.occurrences if o.kind == "read"]
    files = len({o.path for o in facts.occurrences})
    lines.append(
        f"[bold]{escape(facts.name)}[/]: {len(writes)} writes, {len(reads)} reads in {files} files "
        f"[dim]({facts.files_scanned} .py files scanned, {facts.candidate_files} read closely)[/]"
    )
    if not facts.occurrences:
        lines.append("[dim]no occurrence as code[/]")
    if writes:
        lines.append("\n[bold]Writes[/] [dim](defining module first)[/]")
        _render_group(writes, lines, with_flow=True, context=context)
    if reads:
        lines.append("\n[bold]Reads[/]")
        _render_group(reads, lines, with_flow=False)
    for problem in facts.problems:
        lines.append(f"[yellow]skipped[/] {escape(problem.subject)}: {escape(problem.reason)}")


def _render_group(
    items: list[Occurrence], lines: list[str], with_flow: bool, context: _Context = _Context()
) -> None:
    previous: Occurrence | None = None
    for item in items:
        if (
            previous is not None
            and with_flow
            and ((item.path, item.function) != (previous.path, previous.function))
        ):
            _render_flow(previous, lines, context)
        if previous is None or item.path != previous.path:
            lines.append(f"  [cyan]{escape(short_path(item.path, item.module))}[/]")
        previous = item
        lines.append(
            f"    [bold]{item.line:>5}[/]  {escape(item.function)}  [magenta]{item.form}[/]  "
            f"{escape(item.text)}"
        )
        if with_flow and item.branch:
            lines.append(f"           [dim]branch:[/] {escape(guards_text(item.branch))}")
            lines += [f"             [bold]{escape(note)}[/]" for note in _on_gpus(item, context)]
        if with_flow:
            for swallow in item.swallowed:
                lines += _swallow_lines(swallow)
    if with_flow and previous is not None:
        _render_flow(previous, lines, context)


def _swallow_lines(swallow: Swallow) -> list[str]:
    """An except clause that swallows the gate's exception: where, what it hides and from
    where it is raised, and the calls it also covers."""
    lines = [
        f"           [red]swallowed:[/] {escape(swallow.handler)} "
        f"[dim](line {swallow.except_line}, try at {swallow.try_line})[/] "
        f"→ {escape(swallow.action)}"
    ]
    for raiser in swallow.raisers:
        via = " → ".join(short_function(f) for f in raiser.call_path)
        call_line = raiser.call_path[0].line if raiser.call_path else raiser.line
        lines.append(
            f"             hides {escape(raiser.exception)}"
            f"({escape(repr(raiser.message))}) raised at "
            f"{escape(short_path(raiser.path, _module_of(raiser.call_path)))}:"
            f"{raiser.line}, reached from line {call_line} via {escape(via)}"
        )
    if swallow.external_calls:
        calls = ", ".join(f"{c.call} ({c.line})" for c in swallow.external_calls)
        lines.append(f"             and whatever these raise: {escape(calls)}")
    return lines


def _module_of(frames: tuple[Frame, ...]) -> str:
    if not frames:
        return ""
    function = frames[-1].function
    # module.qualname: the module is the part that names the file (its path ends with it).
    parts = function.split(".")
    path = frames[-1].path
    for cut in range(len(parts), 0, -1):
        candidate = ".".join(parts[:cut])
        tail = os.sep.join(parts[:cut])
        if path.endswith(tail + ".py") or path.endswith(os.path.join(tail, "__init__.py")):
            return candidate
    return ""


def _render_flow(item: Occurrence, lines: list[str], context: _Context = _Context()) -> None:
    if not item.knobs:
        return
    lines.append(f"           [green]knobs feeding {escape(item.function)}:[/]")
    for knob in item.knobs:
        where = f"{short_path(knob.path, _module_of(knob.call_path))}:{knob.line}"
        via = " → ".join(f"{short_function(f)}:{f.line}" for f in knob.call_path[:-1])
        suffix = f" [dim]via {escape(via)}[/]" if via else ""
        lines.append(
            f"             [bold]{escape(knob.variable)}[/] [dim]{escape(knob.access)}[/] "
            f"in {escape(short_function(knob.call_path[-1]))} at {escape(where)}{suffix}"
        )
        state = _env_state(knob.variable, context)
        if state:
            lines.append(f"               [bold]{escape(state)}[/]")
