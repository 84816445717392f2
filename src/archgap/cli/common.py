"""What every command shares: options, output (rich text or JSON), progress, exit codes."""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from archgap.cli.options import SUMMARY_FORMATS as SUMMARY_FORMATS
from archgap.cli.options import TABLE_FORMATS as TABLE_FORMATS
from archgap.errors import UsageError as UsageError  # one class for the api and the cli
from archgap.report.markup import escape as escape
from archgap.report.table import VERDICT_STYLE as VERDICT_STYLE
from archgap.report.visible import literal as literal
from archgap.report.visible import one_line
from archgap.report.visible import terminal_safe as terminal_safe
from archgap.transport.target import DEFAULT_CONNECT_TIMEOUT, DEFAULT_PYTHON

if TYPE_CHECKING:
    from rich.console import Console

    from archgap.transport.target import Target

EXIT_OK = 0
EXIT_GAP = 1
EXIT_ERROR = 2


def default_python(environ: dict[str, str] | None = None) -> tuple[str | None, str]:
    """The interpreter to inspect when --python is not given, and why that one: the active
    virtual environment, else the active conda environment, else python3 on PATH (not archgap's
    own, which pipx or a venv of its own would make a useless default)."""
    env = dict(os.environ) if environ is None else environ
    for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        home = env.get(variable)
        for name in ("bin/python", "bin/python3") if home else ():
            candidate = os.path.join(home or "", name)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate, f"{variable}={home}"
    found = shutil.which("python3", path=env.get("PATH", os.defpath))
    if found:
        return found, "python3 on PATH"
    return None, "archgap's own interpreter: no VIRTUAL_ENV, CONDA_PREFIX or python3 on PATH"


def choose_python(args: argparse.Namespace) -> None:
    """Fill in ``args.python`` (when a command inspects an environment here and none is named)
    and ``args.python_source``: which interpreter, and why, for every command to say."""
    if not hasattr(args, "python") or getattr(args, "command", "") not in LOCAL_ENVIRONMENT:
        return
    if getattr(args, "archives", None):  # scan WHEEL: archives, not an environment
        return
    if args.python:
        args.python_source = "--python"
    elif is_remote(args):
        args.python_source = "python3 on the target"
    else:
        args.python, args.python_source = default_python()


def environment_line(args: argparse.Namespace) -> list[str]:
    """The line that says which interpreter's environment a text report is about."""
    source = getattr(args, "python_source", "")
    paths = getattr(args, "paths", None) or getattr(args, "path", None)
    dists = getattr(args, "dists", None) or getattr(args, "dist", None)
    if not source or (paths and not dists):  # only paths: no environment is inspected
        return []
    python = getattr(args, "python", None) or "archgap's own interpreter"
    return [f"[bold]Python[/] {escape(python)} [dim]({escape(source)})[/]"]


# The commands that inspect a Python environment (the default interpreter applies to them).
LOCAL_ENVIRONMENT = ("scan", "gates", "trace", "explain", "probe", "fix")


@dataclass
class Output:
    """Where a command's results go: rich text on a terminal, plain text in a pipe, or JSON."""

    json_mode: bool
    interactive: bool
    command: str = ""
    format: str = "text"
    python_source: str = ""  # why this interpreter was inspected (--python, VIRTUAL_ENV=...)
    quiet: bool = False  # -q: no warnings or progress
    verbosity: int = 0  # -v: notes on stderr; -vv: tracebacks of internal errors

    @classmethod
    def for_args(cls, args: argparse.Namespace) -> Output:
        fmt = str(getattr(args, "format", None) or "text")
        return cls(
            json_mode=fmt == "json",
            interactive=sys.stderr.isatty(),
            command=str(getattr(args, "command", "")),
            format=fmt,
            python_source=str(getattr(args, "python_source", "")),
            quiet=bool(getattr(args, "quiet", False)),
            verbosity=int(getattr(args, "verbose", 0) or 0),
        )

    def note(self, message: str) -> None:
        """A step, on stderr, with -v only."""
        if self.verbosity:
            sys.stderr.write(f"archgap: {message}\n")

    @functools.cached_property
    def terminal(self) -> bool:
        """Whether results go to a terminal (styles, fit to its width) or to a pipe or file."""
        return sys.stdout.isatty()

    @property
    def width(self) -> int | None:
        """The terminal's width to fit tables into; None off a terminal (never truncate)."""
        return self.console.width if self.terminal else None

    @property
    def colour(self) -> bool:
        """Whether styles show as colours (a terminal, and not NO_COLOR or TERM=dumb)."""
        return self.terminal and self.console.color_system is not None

    def lines(self, lines: list[str]) -> None:
        """Rich-markup lines on a terminal (long lines wrap there, never cut); in a pipe the
        same lines must come without markup (see report.table)."""
        if self.terminal:
            self.console.print(terminal_safe("\n".join(lines)), soft_wrap=True)
        else:
            sys.stdout.write(terminal_safe("".join(line + "\n" for line in lines)))

    @functools.cached_property
    def console(self) -> Console:
        from rich.console import Console

        return Console(highlight=False, soft_wrap=not sys.stdout.isatty())

    def print(self, *renderables: Any) -> None:
        """Rich markup: styled on a terminal; in a pipe the text rich would print there, written
        without loading rich when the text is plain enough (``plain_text``)."""
        texts = [terminal_safe(r) if isinstance(r, str) else r for r in renderables]
        if not self.terminal and all(isinstance(t, str) for t in texts):
            plain = plain_text(" ".join(texts))
            if plain is not None:
                sys.stdout.write(plain + "\n")
                return
        self.console.print(*texts)

    def emit(self, command: str, body: dict[str, Any]) -> None:
        from archgap.report.jsondoc import document, dumps

        sys.stdout.write(dumps(document(command, body)) + "\n")

    def error(self, message: str) -> None:
        """A failure on one line on stderr; with --json also an error document on stdout."""
        message = one_line(message)  # a cause that spans lines (urllib's redirect loop) too
        if self.json_mode:
            from archgap.report.jsondoc import SCHEMA_VERSION

            doc = {"schema_version": SCHEMA_VERSION, "command": self.command, "error": message}
            sys.stdout.write(json.dumps(doc) + "\n")
        sys.stderr.write(f"archgap: {message}\n")

    @contextmanager
    def status(self, label: str) -> Iterator[None]:
        """A spinner on a terminal while one long step runs; silent in a pipe or with --json."""
        if self.json_mode or self.quiet or not self.interactive:
            yield
            return
        from rich.console import Console

        with Console(stderr=True).status(label):
            yield

    @contextmanager
    def step(self, label: str) -> Iterator[None]:
        """``status(label)``, and with -v how long it took."""
        started = time.monotonic()
        with self.status(label):
            yield
        self.note(f"{label}: {time.monotonic() - started:.2f} s")

    @contextmanager
    def progress(self, label: str, total: int) -> Iterator[Callable[[str], None]]:
        """A progress bar on a terminal; silent in a pipe or with --json.

        Yields ``advance(item)``: one step done, on ``item``.
        """
        if self.json_mode or self.quiet or not self.interactive:
            yield lambda _item: None
            return
        with _progress_bar(auto_refresh=True) as bar:
            task = bar.add_task(label, total=total, item="")

            def advance(item: str) -> None:
                bar.update(task, advance=1, item=item[-60:])

            yield advance

    @contextmanager
    def counter(self, label: str) -> Iterator[Callable[[int, int, str], None]]:
        """n/N progress that the work tells: yields ``tell(done, total, item)``. On a terminal
        only (silent in a pipe or with --json), and without a refresh thread, so work that forks
        a helper process (a deep kernel read) may run under it."""
        if self.json_mode or not self.interactive:
            yield lambda _done, _total, _item: None
            return
        with _progress_bar(auto_refresh=False) as bar:
            task = bar.add_task(label, total=None, item="")
            shown = [0.0]

            def tell(done: int, total: int, item: str) -> None:
                name = item.rsplit("/", 1)[-1][-40:]  # the file's name: n/N stays in view
                bar.update(task, completed=done, total=total, item=name)
                now = time.monotonic()
                if now - shown[0] >= 0.1 or done >= total:  # at most 10 redraws a second
                    shown[0] = now
                    bar.refresh()

            yield tell


def _progress_bar(auto_refresh: bool) -> Any:
    """A transient rich progress bar on stderr: label, bar, n/N, the current item."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("[dim]{task.fields[item]}"),
    )
    return Progress(
        *columns, console=Console(stderr=True), transient=True, auto_refresh=auto_refresh
    )


def is_remote(args: argparse.Namespace) -> bool:
    """Whether the target options name another machine (its paths are checked there)."""
    return any(getattr(args, k, None) for k in ("host", "container", "pod", "via"))


def request_or_usage_error(sections: list[str], python: str | None) -> dict[str, Any]:
    """The probe request for ``--sections``; an unknown section is a usage error."""
    from archgap.request import UnknownSection, probe_request

    try:
        return probe_request(sections, python)
    except UnknownSection as exc:
        raise UsageError(f"--sections: {exc}") from None


def target_from_args(args: argparse.Namespace) -> Target:
    """The target the options name (``LOCAL`` if none); a bad name raises ``UsageError``."""
    from archgap.transport.target import (
        LOCAL,
        TargetError,
        container_target,
        pod_target,
        ssh_target,
        via_target,
    )

    python = getattr(args, "python", None) or DEFAULT_PYTHON
    try:
        if getattr(args, "host", None):
            return ssh_target(
                args.host, python, getattr(args, "connect_timeout", DEFAULT_CONNECT_TIMEOUT)
            )
        if getattr(args, "container", None):
            return container_target(args.container, python, getattr(args, "container_engine", None))
        if getattr(args, "pod", None):
            return pod_target(args.pod, python)
        if getattr(args, "via", None):
            return via_target(args.via, python)
    except TargetError as exc:
        raise UsageError(str(exc)) from None
    return LOCAL


def check_local_paths(args: argparse.Namespace, paths: list[str]) -> None:
    """Paths on this machine must exist (a remote target's paths are checked there)."""
    remote = is_remote(args)
    missing = [p for p in paths if not remote and not os.path.exists(p)]
    if missing:
        raise UsageError(f"no such file or directory: {', '.join(missing)}")


# The tags the plain-text renderers use; everything else in a line is escaped with escape().
_TAG = re.compile(r"(?<!\\)\[(?:/|bold|dim|cyan|magenta|red|green|yellow)[^\]\[]*\]")


# Home directories name their user: /home/alice, /Users/alice, /root.
_HOME_PATH = re.compile(
    r"(?<![\w.-])(/home|/Users|/var/home)/[^/\s\"'\\:]+|(?<![\w.-])/root(?=/|\b)"
)


def redact(text: str, host: str = "") -> str:
    """``text`` with user names in home paths as <user> and ``host`` (this machine's name) as
    <host>."""
    text = _HOME_PATH.sub(lambda m: (m.group(1) or "") + "/<user>", text)
    if not host:
        return text
    return re.sub(r"(?<![\w.-])" + re.escape(host) + r"(?![\w-])", "<host>", text)


class _Redacting:
    """A text stream that redacts what is written to it (``--redact``)."""

    def __init__(self, stream: Any, host: str) -> None:
        self._stream = stream
        self._host = host

    def write(self, text: str) -> int:
        self._stream.write(redact(text, self._host))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def redact_output() -> None:
    """Every later write to stdout and stderr, text or JSON, goes through ``redact``."""
    import socket

    host = socket.gethostname()
    sys.stdout = _Redacting(sys.stdout, host)
    sys.stderr = _Redacting(sys.stderr, host)


# rich's markup: a tag is "[" then a letter, '#', '/' or '@', up to the next "]"; an odd number
# of backslashes before it makes it text (rich.markup.RE_TAGS and _parse).
_RICH_TAG = re.compile(r"((\\*)\[([a-z#/@][^[]*?)])")
# What rich does more with text than dropping tags: emoji codes (":name:") and tab stops.
_RICH_MORE = re.compile(r":\S*?:|\t")


def plain_text(markup: str) -> str | None:
    """What rich prints for ``markup`` without styles (a pipe, a file): the tags dropped, the
    escaped brackets and backslashes as text (rich.markup.render); None where rich could change
    more (an emoji code, a tab): rich then prints it."""
    if _RICH_MORE.search(markup):
        return None
    parts = []
    position = 0
    for match in _RICH_TAG.finditer(markup):
        tag, escapes = match.group(1), match.group(2)
        start = match.start()
        if start > position:
            parts.append(markup[position:start].replace("\\[", "["))
        backslashes, escaped = divmod(len(escapes), 2)
        parts.append("\\" * backslashes)
        if escaped:
            parts.append(tag[len(escapes) :])
        position = match.end()
    parts.append(markup[position:].replace("\\[", "["))
    return "".join(parts)


def emit_text(lines: list[str], out: Output) -> None:
    """Rich text on a terminal; in a pipe the same text without styles, and without loading
    rich at all (its import is a noticeable part of a fast command's time)."""
    text = terminal_safe("\n".join(lines))
    if sys.stdout.isatty():
        out.print(text)
    else:
        sys.stdout.write(_TAG.sub("", text).replace("\\[", "[") + "\n")


def print_shown(out: Output, args: argparse.Namespace, rendering: Any, result: Any) -> None:
    """What gates and trace print of their ``result`` (``rendering``: their report module):
    the JSON document, Markdown or CSV, or the text after the line naming the environment."""
    if out.json_mode:
        from archgap.report.jsondoc import dumps

        sys.stdout.write(dumps(rendering.document(result)) + "\n")
    elif out.format == "markdown":
        sys.stdout.write(terminal_safe(rendering.markdown_of(result)))
    elif out.format == "csv":
        sys.stdout.write(terminal_safe(rendering.csv_of(result)))
    else:
        emit_text([*environment_line(args), *rendering.text(result)], out)
