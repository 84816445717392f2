"""Which renderer prints a command's result in each output format (``--format``), one table for
every command that has several: the cli parses, calls the api and hands the result here.

Each command's report module is imported only when its result is printed, so a command loads
the renderers it uses and no other."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from archgap.report.console import Output, emit_text
from archgap.report.markup import escape
from archgap.report.visible import terminal_safe


@dataclass(frozen=True)
class View:
    """What shapes a rendering besides the result and the output: the command's own options."""

    detail: bool = False  # scan --libs (the library view), kernels --all (every file and entry)
    elapsed: float = 0.0  # seconds the command took, where its report says so
    first: bool = False  # versions --first
    python: str = ""  # gates and trace: the interpreter whose environment was read
    html: str = ""  # fleet --html: the page its text names


Printer = Callable[[Output, Any, View], None]


def show(out: Output, command: str, result: Any, view: View = View()) -> None:
    """Print ``result`` of ``command`` in the output's format."""
    PRINTERS[command]["json" if out.json_mode else out.format](out, result, view)


def _write(text: str) -> None:
    sys.stdout.write(terminal_safe(text))


def _scan_text(out: Output, report: Any, view: View) -> None:
    from archgap.report.scan import text
    from archgap.report.table import text_lines

    shown = text(report, view.detail, view.elapsed, out.python_source, out.quiet, out.verbosity > 0)
    for block in shown:
        if isinstance(block, str):
            out.print(block)
        else:  # a table, fitted to the terminal (full rows in a pipe)
            out.lines(text_lines(block, out.width, out.terminal))


def _kernels_markdown(out: Output, result: Any, view: View) -> None:
    from archgap.report.kernels import markdown_text

    text, gate = markdown_text(result, view.detail)
    _write(text)
    if gate:
        emit_text(gate, out)


def _kernels_github(out: Output, result: Any, view: View) -> None:
    """kernels --format github: annotations, then the text report where no command runs."""
    from archgap.report.console import plain_text
    from archgap.report.kernels import text
    from archgap.report.kernels_ci import github

    lines = text(result, view.detail, False)
    _write(github(result, [plain_text(line) or line for line in lines]))


def _versions_text(out: Output, report: Any, view: View) -> None:
    from archgap.report.versions import text

    lines = text(report, view.elapsed, out.width, out.terminal, out.quiet, out.verbosity)
    if out.terminal:  # soft-wrapped: the pip line is copied as one line, however long
        out.lines(lines)
    else:
        emit_text(lines, out)


def _gpus_text(out: Output, items: Any, view: View) -> None:
    from archgap.report.gpus import sources, table
    from archgap.report.table import text_lines

    out.lines([*text_lines(table(items, True), out.width, out.terminal), "", *sources(items)])


def _fleet_text(out: Output, run: Any, view: View) -> None:
    from archgap.report.fleet import headline, text

    title = headline(run.report, run.elapsed, run.documents)
    out.print_lines(text(run.report, title, view.html, run.shared_caches))


def _fleet_table(name: str) -> Printer:
    """fleet's Markdown, CSV or summary (report.fleet_tables)."""
    return lambda out, run, view: _write(
        getattr(_module("fleet_tables"), name)(run.report, run.elapsed)
    )


def _document(module: str) -> Printer:
    """The command's whole JSON document, as its report module builds it."""

    def emit(out: Output, result: Any, view: View) -> None:
        from archgap.report.jsondoc import dumps

        sys.stdout.write(dumps(_module(module).document(result)) + "\n")

    return emit


def _shown(module: str) -> dict[str, Printer]:
    """gates and trace: the document, Markdown, CSV, or the text after the heading."""
    return {
        "json": _document(module),
        "markdown": lambda out, r, view: _write(_module(module).markdown_of(r)),
        "csv": lambda out, r, view: _write(_module(module).csv_of(r)),
        "text": lambda out, r, view: emit_text([*_env(out, view), *_module(module).text(r)], out),
    }


def _env(out: Output, view: View) -> list[str]:
    """The line that says which environment was read (none when only paths were)."""
    if not view.python:
        return []
    return [f"[bold]Python[/] {escape(view.python)} [dim]({escape(out.python_source)})[/]"]


def _version() -> str:
    from archgap import __version__

    return __version__


def _module(name: str) -> Any:
    import importlib

    return importlib.import_module(f"archgap.report.{name}")


PRINTERS: dict[str, dict[str, Printer]] = {
    "scan": {
        "json": lambda out, r, view: out.emit("scan", _module("scan").body(r, view.elapsed)),
        "summary": lambda out, r, view: _write(_module("scan").summary(r, view.elapsed) + "\n"),
        "markdown": lambda out, r, view: _write(_module("scan").markdown(r, view.detail)),
        "csv": lambda out, r, view: _write(_module("scan").csv(r, view.detail)),
        "text": _scan_text,
    },
    "kernels": {
        "json": _document("kernels"),
        "markdown": _kernels_markdown,
        "csv": lambda out, r, view: _write(_module("kernels").csv_of(r, view.detail)),
        "sarif": lambda out, r, view: _write(
            _module("jsondoc").dumps(_module("kernels_ci").sarif(r, _version())) + "\n"
        ),
        "github": _kernels_github,
        "text": lambda out, r, view: emit_text(
            _module("kernels").text(r, view.detail, out.colour), out
        ),
    },
    "versions": {
        "json": lambda out, r, view: out.emit(
            "versions", _module("versions").body(r, view.first, view.elapsed)
        ),
        "markdown": lambda out, r, view: _write(_module("versions").markdown(r)),
        "csv": lambda out, r, view: _write(_module("versions").csv(r)),
        "text": _versions_text,
    },
    "gpus": {
        "json": lambda out, items, view: out.emit("gpus", {"gpus": items}),
        "markdown": lambda out, items, view: _write(_module("gpus").markdown(items)),
        "csv": lambda out, items, view: _write(_module("gpus").csv(items)),
        "text": _gpus_text,
    },
    "recipe": {
        "json": lambda out, r, view: out.emit("recipe", _module("recipe").body(r)),
        "text": lambda out, r, view: emit_text(_module("recipe").text_lines(r), out),
    },
    "verify": {
        "json": lambda out, r, view: out.emit("verify", _module("verify").body(r)),
        "text": lambda out, r, view: emit_text(_module("verify").text(r), out),
    },
    "fleet": {
        "json": lambda out, run, view: out.emit(
            "fleet",
            _module("fleet").body(run.report, run.elapsed, run.documents, run.shared_caches),
        ),
        "markdown": _fleet_table("markdown"),
        "csv": _fleet_table("csv"),
        "summary": _fleet_table("summary"),
        "text": _fleet_text,
    },
    "gates": _shown("gates"),
    "trace": _shown("trace"),
}
