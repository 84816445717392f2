"""archgap trace NAME: where a value is decided (written), not just where it is read."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from archgap.cli import options as opt
from archgap.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    Output,
    UsageError,
    check_local_paths,
    emit_shown,
    escape,
    probe_facts,
    probe_section,
    short_path,
)

if TYPE_CHECKING:
    from archgap.probe.facts import Frame, Guard, Occurrence, TraceFacts


HELP = "every place a name is written and read, with the env vars that feed it"
DESCRIPTION = (
    "Every place NAME occurs as code in the environment's site-packages (or the given "
    "distributions or paths): writes first, defining module first, each with its branch; the "
    "environment variables that feed each write (through calls, with the call path); and broad "
    "excepts around a write that swallow what their try can raise."
)
OPTIONS = (
    opt.option(
        "name",
        metavar="NAME",
        help="an identifier (TARGET_CUDA_ARCHS), a dotted name (torch.cuda.get_device_capability) "
        "or a string key (FLASHINFER_CUDA_ARCH_LIST)",
    ),
    # A default: argparse would otherwise call PATH required when NAME is missing.
    opt.option(
        "paths", nargs="*", default=[], metavar="PATH", help="files or directories to search"
    ),
    opt.repeated("--dist", "DIST", "search only this installed distribution's files (repeatable)"),
    opt.ALL_TREES,
    opt.ENVIRONMENT,
    opt.output(opt.TABLE_FORMATS),
    opt.TARGET,
)


def check_name(name: str) -> None:
    from archgap.probe.source.trace import valid_name

    if not valid_name(name):
        raise UsageError(
            f"cannot trace {name!r}: give an identifier, a dotted name or a string key "
            "(letters, digits, _ . - / :), without spaces or shell characters"
        )


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.codec import decode
    from archgap.probe.facts import TraceFacts
    from archgap.request import trace_request

    check_name(args.name)
    check_local_paths(args, args.paths)
    request = trace_request(args.name, args.paths, args.dist, args.python)
    facts = decode(TraceFacts, probe_section(probe_facts(args, out, request), "trace"))
    if facts.error:
        out.error(facts.error)
        return EXIT_ERROR
    from archgap.report import trace as shown

    facts, left = shown.select(facts, bool(args.show_all))
    emit_shown(out, args, shown, facts, left, render)
    return EXIT_OK


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


def render(facts: TraceFacts, lines: list[str]) -> None:
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
        _render_group(writes, lines, with_flow=True)
    if reads:
        lines.append("\n[bold]Reads[/]")
        _render_group(reads, lines, with_flow=False)
    for problem in facts.problems:
        lines.append(f"[yellow]skipped[/] {escape(problem.subject)}: {escape(problem.reason)}")


def _render_group(items: list[Occurrence], lines: list[str], with_flow: bool) -> None:
    previous: Occurrence | None = None
    for item in items:
        if (
            previous is not None
            and with_flow
            and ((item.path, item.function) != (previous.path, previous.function))
        ):
            _render_flow(previous, lines)
        if previous is None or item.path != previous.path:
            lines.append(f"  [cyan]{escape(short_path(item.path, item.module))}[/]")
        previous = item
        lines.append(
            f"    [bold]{item.line:>5}[/]  {escape(item.function)}  [magenta]{item.form}[/]  "
            f"{escape(item.text)}"
        )
        if with_flow and item.branch:
            lines.append(f"           [dim]branch:[/] {escape(guards_text(item.branch))}")
        if with_flow:
            for swallow in item.swallowed:
                lines.append(
                    f"           [red]swallowed:[/] {escape(swallow.handler)} "
                    f"[dim](line {swallow.except_line}, try at {swallow.try_line})[/] "
                    f"→ {escape(swallow.action)}"
                )
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
    if with_flow and previous is not None:
        _render_flow(previous, lines)


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


def _render_flow(item: Occurrence, lines: list[str]) -> None:
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
