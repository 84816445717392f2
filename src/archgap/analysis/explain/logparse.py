"""Reading crash logs: de-prefixed, de-interleaved lines, Python tracebacks, warnings and evidence.

Pure: text in, a frozen ``ParsedLog`` out. Real logs are hostile: ANSI colours, timestamps, rank
prefixes (``[2026-11-28 10:00:01 TP3]``, ``(EngineCore_0 pid=9492)``), eight workers writing the
same traceback at once, megabytes of unrelated output, single lines of megabytes, JSON records
holding a whole traceback, messages wrapped by a terminal or an editor. A JSON record is read as
the lines it holds, a longer line than ``LINE_LIMIT`` by its first and last ``MAX_LINE``
characters (``logrecords``), and a wrapped message as one line (``logwrap``) before any regex
sees it, and each line's prefixes are peeled (``logprefix``); every regex is anchored or starts
on a literal, and cheap substring tests gate the rest, so time is linear in the input.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cache

from archgap.analysis.explain.logevidence import Evidence, any_literal, collect_evidence
from archgap.analysis.explain.logprefix import strip_line as strip_line  # a line's prefixes
from archgap.analysis.explain.logrecords import (
    LINE_LIMIT,
    expand_records,
    may_hold_records,
)
from archgap.analysis.explain.logrecords import MAX_LINE as MAX_LINE  # the length of a line's ends
from archgap.analysis.explain.logwrap import MIN_WRAPPED, Unwrapped
from archgap.kb.evidence import evidence_patterns
from archgap.kb.gpus import may_mention

MAX_MESSAGE_LINES = 12  # continuation lines kept for one exception message
MAX_FRAMES = 200
MAX_WARNINGS = 200

_TRACEBACK_START = "Traceback (most recent call last):"
_FRAME = re.compile(
    r'\s*File "(?P<file>[^"]{1,1000})", line (?P<line>\d{1,7})(?:, in (?P<func>\S{1,200}))?\s*$'
)
_CARETS = re.compile(r"\s*[~^]+\s*$")
_EXCEPTION = re.compile(r"(?P<type>[A-Za-z_][\w.]{0,120})(?:: ?(?P<message>.*))?$")
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
_CPP_RAISED = re.compile(
    r"Exception raised from (?P<func>\S{1,200}) at (?P<file>[^\s:]{1,500}):(?P<line>\d{1,7})"
)


@dataclass(frozen=True)
class TracebackFrame:
    """A frame of a traceback as a log printed it (a static call-path step is probe.facts.Frame)."""

    file: str
    line: int
    function: str
    code: str  # the source line the log printed ("" when absent)


@dataclass(frozen=True)
class Traceback:
    frames: tuple[TracebackFrame, ...]
    exception_type: str
    message: str  # the exception message, continuation lines joined with "\n"
    workers: tuple[str, ...]  # every worker that printed this same traceback ("" = unprefixed)
    first_line: int  # 1-based line number in the input
    chained_from: int | None = None  # index of the traceback this one was raised while handling


@dataclass(frozen=True)
class Warning_:
    text: str
    workers: tuple[str, ...]
    count: int
    first_line: int


@dataclass(frozen=True)
class ParsedLog:
    lines: int
    truncated_lines: int  # lines longer than LINE_LIMIT (read by their two ends)
    workers: tuple[str, ...]
    tracebacks: tuple[Traceback, ...]
    warnings: tuple[Warning_, ...]
    evidence: tuple[Evidence, ...]
    messages: tuple[tuple[int, str], ...]  # (line, text) of lines worth matching signatures on

    def evidence_of(self, kind: str) -> tuple[Evidence, ...]:
        return tuple(e for e in self.evidence if e.kind == kind)


@dataclass
class _WarningCount:
    first_line: int
    workers: dict[str, None] = field(default_factory=dict)
    count: int = 0


@dataclass
class _Line:
    number: int
    worker: str
    level: str
    text: str


_WARNING_LEVELS = ("WARNING", "WARN", "W")


def _is_warning(line: _Line) -> bool:
    if line.level in _WARNING_LEVELS:
        return True
    head = line.text[:200]
    return "Warning:" in head or head.startswith(("Failed to get device capability", "WARNING"))


# Lines worth matching signatures on: the signatures' keywords all sit in error-ish text; keeping
# only lines with one of these literals keeps matching cheap on megabytes of unrelated output.
_MESSAGE_GATES = (
    "error",
    "require",
    "sm_",
    "sm7",
    "sm 1",
    "capability",
    "kernel image",
    "not compatible",
    "incompatible device",
    "unsupported",
    "gpu-name",
    "gpu-architecture",
    "unknown cuda arch",
    "mismatch",
    "flashattention",
    "common_ops",
    "not a recognized processor",
    "insufficient",
    "failed",
    "found gpu",
    "critical",
    "only supports",
    "only support cuda",
    "nccl",
    "illegal",
    "misaligned",
    "out of memory",
    "kv cache",
    "cache blocks",
    ".target",
    ".version",
    "headers are incompatible",
    "invalid device function",
    "arch_mismatch",
    "not supported",
    "not yet supported",
    "not currently supported",
    "only supported",
    "backend",
    "repository not found",
    "gated repo",
    "resolutionimpossible",
    "no matching distribution",
    "could not find a version",
    "compiled with cuda",
)


_LOUD, _QUIET_BLANK, _QUIET_TEXT = 0, 1, 2
_QUIET_CACHE = 1 << 16  # distinct lines remembered ...
_CACHED_LINE = 512  # ... of up to this length (a flood's lines are short)


def _quiet_kind(raw: str) -> int:
    """_LOUD for a line that may say anything to the parser; for one that cannot (no prefix, no
    gate of a message, a warning, a traceback or evidence, no model number: most of a flood of
    progress lines), whether it is blank. A few searches, each of one pattern for all gates."""
    if not raw.isascii() or len(raw) > LINE_LIMIT or "\x1b" in raw or "\r" in raw:
        return _LOUD
    lowered = raw.lower()
    if _LOUD_START.match(lowered) or _loud_word().search(lowered):
        return _LOUD
    if may_mention(raw):  # a GPU named in words (mentioned_products finds none without)
        return _LOUD
    return _QUIET_TEXT if raw.strip() else _QUIET_BLANK


class _Reader:
    """The numbered lines worth parsing, their prefixes peeled (``strip_line``), with whether
    quiet lines with text (``_quiet_kind``, of the line or of its text after its prefix) were
    passed over before each; every line while a traceback is open (``builders``). Keeps the
    workers the prefixes name, and the last."""

    def __init__(self, numbered: Iterable[tuple[int, str]], builders: Mapping[str, object]) -> None:
        self.numbered, self.builders = numbered, builders
        self.lines = self.truncated = 0  # lines read; lines longer than LINE_LIMIT
        self.workers: dict[str, None] = {}
        self.last_worker = ""

    def __iter__(self) -> Iterator[tuple[int, str, str, str, bool]]:
        kinds: dict[str, int] = {}  # line -> its kind (a flood repeats its lines)
        passed = False
        for number, raw in self.numbered:
            self.lines = number
            if not self.builders:
                kind = _cached_kind(raw, kinds)
                if kind != _LOUD:
                    passed = passed or kind == _QUIET_TEXT
                    continue
            if len(raw) > LINE_LIMIT:
                self.truncated += 1
            worker, level, text = strip_line(raw)
            if worker:
                self.workers.setdefault(worker, None)
                self.last_worker = worker
            if self._quiet_rest(raw, level, text):
                passed = passed or bool(text.strip())
                continue
            yield number, worker, level, text, passed
            passed = False

    def _quiet_rest(self, raw: str, level: str, text: str) -> bool:
        """Whether a line outside any traceback is quiet once its prefix (or colour) was peeled:
        its ``text`` is shorter than the ``raw`` line, its ``level`` no warning's, and the rest
        cannot say anything to the parser (``_quiet_kind``)."""
        return (
            not self.builders
            and len(text) < len(raw)
            and level not in _WARNING_LEVELS
            and _quiet_kind(text) != _LOUD
        )


def _cached_kind(raw: str, kinds: dict[str, int]) -> int:
    """``_quiet_kind`` of a line, remembered in ``kinds`` for lines up to ``_CACHED_LINE``
    characters (a flood repeats its lines), the memory cleared at ``_QUIET_CACHE`` lines."""
    kind = kinds.get(raw) if len(raw) <= _CACHED_LINE else None
    if kind is None:
        if len(kinds) >= _QUIET_CACHE:
            kinds.clear()
        kind = _quiet_kind(raw)
        if len(raw) <= _CACHED_LINE:
            kinds[raw] = kind
    return kind


_LOUD_START = re.compile(
    r"[\[(>]|[iwef][0-9]|(?:debug|info|warning|warn|error|critical)(?: {1,3}[0-9]| [-:] )"
)  # (lowercased) the start of a prefix strip_line peels


@cache
def _loud_word() -> re.Pattern[str]:
    """Any literal the parser, the signatures' gates or the evidence patterns look for, in a
    lowercased line: one trie (alone in its pattern, so that ``re`` skips the positions no
    literal starts at)."""
    words = {
        *_MESSAGE_GATES,
        _TRACEBACK_START.lower(),
        'file "',
        *(c.lower() for c in _CHAINED),
        "exception raised from",
        "warning",
        "failed to get device capability",
        *(rule.gate for rule in evidence_patterns()),
    }
    return re.compile(any_literal(sorted(words)))


@cache
def _message_gate() -> re.Pattern[str]:
    return re.compile(any_literal(_MESSAGE_GATES))


class _TracebackBuilder:
    """Collects the traceback lines of one worker stream."""

    def __init__(self, start: int, worker: str, chained_from: int | None) -> None:
        self.start = start
        self.worker = worker
        self.frames: list[TracebackFrame] = []
        self.pending: tuple[str, int, str] | None = None
        self.exception: tuple[str, list[str]] | None = None
        self.chained_from = chained_from

    def feed(self, text: str) -> bool:
        """Take one line; False when the line ends the traceback (not consumed)."""
        if self.exception is not None:
            return self._message_line(text, self.exception[1])
        frame = _FRAME.match(text)
        if frame:
            self._flush()
            self.pending = (
                frame.group("file"),
                int(frame.group("line")),
                frame.group("func") or "",
            )
            return True
        if _CARETS.match(text) or not text.strip():
            return True
        if text[:1].isspace():  # the code line under a frame
            self._flush(text.strip())
            return True
        exception = _EXCEPTION.match(text)
        if exception and (self.frames or self.pending):
            self._flush()
            self.exception = (exception.group("type"), [(exception.group("message") or "").strip()])
            return True
        return False

    def _message_line(self, text: str, message: list[str]) -> bool:
        """Take a line after the exception's: a continuation of its ``message``, or False where
        it ends the traceback (a blank line, a chained or new traceback, the message full)."""
        stop = (
            not text.strip()
            or text.startswith(_CHAINED)
            or _TRACEBACK_START in text
            or len(message) >= MAX_MESSAGE_LINES
        )
        # A message continues on unindented lines only when its first line was empty
        # ("RuntimeError:" then the text, as torch's cpp_extension prints it); otherwise a
        # following unprefixed line is the next log record, not part of the message.
        continues = text[:1].isspace() or not message[0]
        if stop or not continues:
            return False
        message.append(text.strip())
        return True

    def _flush(self, code: str = "") -> None:
        """Keep the pending frame (up to MAX_FRAMES), with ``code``, the source line under it."""
        if self.pending is not None:
            file, number, func = self.pending
            if len(self.frames) < MAX_FRAMES:
                self.frames.append(TracebackFrame(file, number, func, code))
            self.pending = None

    def result(self) -> tuple[tuple[TracebackFrame, ...], str, str] | None:
        self._flush()
        if self.exception is None:
            return None
        kind, message = self.exception
        return tuple(self.frames), kind, "\n".join(m for m in message if m)


def split_lines(text: str) -> list[str]:
    """The lines of a log as its writer meant them and editors number them: only \\n ends a line
    (str.splitlines also breaks at \\r, \\x0b, \\x0c, \\x1c-\\x1e, \\x85 and \\u2028, which shifts
    every later line number and makes a flood of \\r millions of lines)."""
    lines = text.split("\n")
    if lines and not lines[-1]:
        lines.pop()
    return lines


def parse_log(text: str, tail: str = "", skipped_lines: int = 0) -> ParsedLog:
    """Read a log (any size): workers, tracebacks, warnings, evidence and candidate messages.

    ``tail`` is the end of a log whose middle was not read (``skipped_lines`` lines): its lines
    keep their numbers in the whole log."""
    head = split_lines(text)
    numbered: Iterable[tuple[int, str]] = enumerate(head, start=1)
    if tail:
        later = enumerate(split_lines(tail), start=len(head) + skipped_lines + 1)
        numbered = itertools.chain(numbered, later)
    if may_hold_records(text) or may_hold_records(tail):
        numbered = expand_records(numbered, lambda raw: _quiet_kind(raw) == _LOUD)
    if not _may_wrap(head) and not (tail and _may_wrap(split_lines(tail))):
        return parse_lines(numbered)  # no line long enough to be wrapped (a flood of short ones)
    lines = Unwrapped(numbered)
    parsed = parse_lines(lines)
    return replace(parsed, lines=max(parsed.lines, lines.last))


def _may_wrap(lines: list[str]) -> bool:
    """Whether any line is long enough to have been wrapped (``logwrap``): in C, at a few ns a
    line, so that a flood of short lines does not pay for looking."""
    return max(map(len, lines), default=0) >= MIN_WRAPPED


def parse_lines(numbered_lines: Iterable[tuple[int, str]]) -> ParsedLog:
    builders: dict[str, _TracebackBuilder] = {}
    finished: list[tuple[_TracebackBuilder, tuple[TracebackFrame, ...], str, str]] = []
    warnings: dict[str, _WarningCount] = {}
    evidence: dict[tuple[str, str], Evidence] = {}
    evidence_counts: dict[str, int] = {}
    messages: list[tuple[int, str]] = []
    seen_messages: set[str] = set()
    stream: str | None = None  # whose traceback the last non-blank line belonged to
    number = 0

    def finish(worker: str) -> None:
        builder = builders.pop(worker, None)
        if builder is not None:
            result = builder.result()
            if result is not None:
                finished.append((builder, *result))
            elif builder.frames and builder.frames[-1].code and len(messages) < 10_000:
                # A traceback cut before its exception line: the raising code line is the
                # nearest thing to a message ('raise ValueError("No available memory ...')
                messages.append((builder.start, builder.frames[-1].code))

    reader = _Reader(numbered_lines, builders)
    for number, prefixed, level, text, passed_text in reader:
        if passed_text:  # quiet lines with text were passed over: no traceback's line is last
            stream = None
        worker = _line_worker(prefixed, text, stream, "" in builders, reader.last_worker)
        line = _Line(number, worker, level, text)

        collect_evidence(number, text, evidence, evidence_counts)
        builder = builders.get(worker)
        if builder is not None and not builder.feed(text):
            finish(worker)
            builder = None
        if builder is None and _FRAME.match(text):
            # A traceback pasted without its header line still has frames.
            builder = builders[worker] = _TracebackBuilder(number, worker, None)
            builder.feed(text)
            stream = worker
            continue
        if builder is None and _TRACEBACK_START in text:
            builders[worker] = _start_traceback(line, finished, messages)
            stream = worker
            continue
        if builder is not None:
            stream = worker
            continue
        if text.startswith(_CHAINED):
            stream = worker
        elif text.strip():
            stream = None
        _outside_traceback(line, finished, warnings, messages, seen_messages)
    for worker in list(builders):
        finish(worker)

    return ParsedLog(
        lines=reader.lines,
        truncated_lines=reader.truncated,
        workers=tuple(reader.workers),
        tracebacks=_merge_tracebacks(finished),
        warnings=tuple(
            Warning_(text, tuple(entry.workers), entry.count, entry.first_line)
            for text, entry in warnings.items()
        ),
        evidence=tuple(sorted(evidence.values(), key=lambda e: e.line)),
        messages=tuple(messages),
    )


def _start_traceback(
    line: _Line,
    finished: list[tuple[_TracebackBuilder, tuple[TracebackFrame, ...], str, str]],
    messages: list[tuple[int, str]],
) -> _TracebackBuilder:
    """The builder of a traceback that starts on ``line``: chained to the last finished one of
    the same worker when that began shortly before."""
    number, worker = line.number, line.worker
    chained = None
    if finished and finished[-1][0].worker == worker and number - finished[-1][0].start < 10_000:
        chained = len(finished) - 1
    rest = line.text.replace(_TRACEBACK_START, " ").strip()
    if len(rest) > 40 and len(messages) < 10_000:
        # A whole traceback flattened onto one line (pasted logs): keep it matchable.
        messages.append((number, rest))
    return _TracebackBuilder(number, worker, chained)


def _line_worker(
    worker: str, text: str, stream: str | None, open_unprefixed: bool, last_worker: str
) -> str:
    """Whose line this is: the worker its prefix names; for an unprefixed line, the traceback
    it starts (its own, or chained to the one just printed, not the traceback of whichever rank
    wrote last), the open unprefixed traceback it continues, else the stream that wrote last."""
    if worker:
        return worker
    if _TRACEBACK_START in text:
        return stream if stream is not None else ""
    if open_unprefixed:
        return ""
    return last_worker


def _outside_traceback(
    line: _Line,
    finished: list[tuple[_TracebackBuilder, tuple[TracebackFrame, ...], str, str]],
    warnings: dict[str, _WarningCount],
    messages: list[tuple[int, str]],
    seen_messages: set[str],
) -> None:
    """A line outside any traceback: a C++ exception's origin ("Exception raised from ...")
    closes a one-frame traceback with the message before it, a warning is counted, and an
    error-ish line is kept for signature matching."""
    number, worker, text = line.number, line.worker, line.text
    cpp = _CPP_RAISED.search(text) if "Exception raised from" in text else None
    if cpp:
        frame = TracebackFrame(cpp.group("file"), int(cpp.group("line")), cpp.group("func"), "")
        prior = messages[-1][1] if messages else ""
        kind, _, message = prior.partition(": ")
        finished_builder = _TracebackBuilder(number, worker, None)
        finished.append(
            (finished_builder, (frame,), kind if message else "Error", message or prior)
        )
    if _is_warning(line) and len(warnings) < MAX_WARNINGS:
        entry = warnings.setdefault(text.strip(), _WarningCount(number))
        entry.workers.setdefault(worker, None)
        entry.count += 1
    lowered = text.lower()
    if _message_gate().search(lowered):
        key = text.strip()
        if key and key not in seen_messages and len(messages) < 10_000:
            seen_messages.add(key)
            messages.append((number, key))


def _merge_tracebacks(
    finished: list[tuple[_TracebackBuilder, tuple[TracebackFrame, ...], str, str]],
) -> tuple[Traceback, ...]:
    """One Traceback per distinct (frames, type, message), listing every worker that printed it
    (in the order their copies began); the first copy to finish gives the line and the chaining."""
    index_of: dict[tuple[object, ...], int] = {}
    copies: list[tuple[tuple[TracebackFrame, ...], str, str, list[_TracebackBuilder]]] = []
    merged_at: list[int] = []  # position in ``finished`` -> index of its merged traceback
    for builder, frames, kind, message in finished:
        key = (tuple((f.file, f.line, f.function) for f in frames), kind, message)
        if key not in index_of:
            index_of[key] = len(copies)
            copies.append((frames, kind, message, []))
        copies[index_of[key]][3].append(builder)
        merged_at.append(index_of[key])
    out: list[Traceback] = []
    for frames, kind, message, builders in copies:
        first = builders[0]
        starts: dict[str, int] = {}
        for builder in builders:
            starts.setdefault(builder.worker, builder.start)
        chained = merged_at[first.chained_from] if first.chained_from is not None else None
        workers = tuple(sorted(starts, key=starts.__getitem__))
        out.append(Traceback(frames, kind, message, workers, first.start, chained))
    return tuple(out)
