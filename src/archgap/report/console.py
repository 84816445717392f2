"""How results reach the user: rich text on a terminal (styles, fitted to its width, spinners and
progress bars on stderr), the same text without styles in a pipe (without loading rich where the
text is plain enough), JSON documents, one-line errors on stderr, and ``--redact``."""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from archgap.report.visible import one_line, terminal_safe

if TYPE_CHECKING:
    from rich.console import Console


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
    def for_args(cls, args: Any) -> Output:
        """The output a command's parsed arguments ask for (--format/--json, -q, -v)."""
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

    def print_lines(self, lines: list[str]) -> None:
        """A renderer's rich-markup lines, each as ``print`` prints it."""
        for line in lines:
            self.print(line)

    def emit(self, command: str, body: dict[str, Any]) -> None:
        from archgap.report.jsondoc import document, write

        # Written as it is made: a 50,000-host fleet document is about 100 MB of text, and its
        # parts held at once several times that (jsondoc.write).
        write(document(command, body), sys.stdout)

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


# The tags the text renderers use; everything else in a line is escaped (report.markup.escape).
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


# This process's own descriptors by name: written to as the descriptor (at its offset, as the
# shell left it), never opened afresh, truncated or replaced.
_DESCRIPTOR = re.compile(r"/dev/(stdout|stderr)|/dev/fd/(\d+)|/proc/(?:self|thread-self)/fd/(\d+)")


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` to the output file ``path`` the user named, never replacing what is not a
    regular file:

    - a regular file (or none yet): through a temporary file in the same directory and a rename,
      so a reader (node_exporter, nfd-worker, fleet --from) never sees half a file. The temporary
      name starts with a dot and does not end in .prom or .json, so no reader takes it;
    - a character device or a FIFO (``/dev/null``, a pipe): written to in place, as the shell's
      ``>`` does (a FIFO waits for its reader); ``/dev/stdout``, ``/dev/fd/N``: that descriptor;
    - a symbolic link to anything else, a directory, a socket, a block device: refused
      (``OSError``), so a link is never written through nor replaced (name its target)."""
    named = _DESCRIPTOR.fullmatch(os.path.normpath(path))
    if named:
        stream, number = named.group(1), named.group(2) or named.group(3)
        _write_descriptor(int(number) if number else 1 + (stream == "stderr"), text)
        return
    import stat

    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    if info is None or stat.S_ISREG(info.st_mode):
        _replace(path, text)
        return
    if stat.S_ISLNK(info.st_mode):
        try:
            info = os.stat(path)
        except OSError:
            info = None
    kind = -1 if info is None else stat.S_IFMT(info.st_mode)
    if kind in (stat.S_IFCHR, stat.S_IFIFO):
        fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)  # no O_CREAT: it is there
        try:
            _write_all(fd, text.encode("utf-8"))
        finally:
            os.close(fd)
        return
    what = {stat.S_IFDIR: "a directory", stat.S_IFSOCK: "a socket", stat.S_IFBLK: "a block device"}
    if os.path.islink(path):
        target = os.readlink(path)
        raise OSError(f"a symbolic link (to {target}): not written through; name the file itself")
    raise OSError(f"{what.get(kind, 'not a regular file')}: not replaced by an output file")


def _write_descriptor(fd: int, text: str) -> None:
    """``text`` on this process's descriptor ``fd``, after what sys.stdout/stderr hold."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    try:
        _write_all(fd, text.encode("utf-8"))
    except OSError as exc:
        raise OSError(f"descriptor {fd}: {exc.strerror or exc}") from None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _replace(path: str, text: str) -> None:
    """A regular file's new content, through a temporary file and a rename."""
    import tempfile  # not at import: few commands write files

    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=".archgap-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
