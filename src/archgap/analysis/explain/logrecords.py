"""A log's lines as their writer meant them, before any prefix or pattern sees them.

Pure. Two shapes hide what a plain log shows:

- A **JSON log record** (Kubernetes' and Docker's log files, Python's JSON loggers, structlog,
  Go's zap) holds a whole traceback in one string field, its newlines escaped: ``{"msg": "Engine
  died", "exc_info": "Traceback (most recent call last):\\n  File ..."}``. A line that is a JSON
  object, alone or after a timestamp (and a container runtime's ``stderr F``), is read as the
  lines of its string fields: every string holding a newline, split at its newlines, and the
  message-like fields (``MESSAGE_KEYS``) as one line each, in the record's order, all numbered
  with the record's line. A record on one line with no newline in it (vLLM's or ray's JSON
  logging, ``kubectl logs`` of a JSON logger: ``{"level": "error", "msg": "CUDA error: ..."}``)
  is read by its message fields alone, its escapes undone, when the caller's ``wanted`` says the
  line may say something (a cheap test on the raw line: most records of a flood are not parsed).
- An **over-long line** (a record too long to parse, a progress bar, a minified blob ending in the
  error) is kept by its two ends, ``MAX_LINE`` characters each: errors come last.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator

MAX_LINE = 4096  # of a longer line its first and its last MAX_LINE characters are read
CUT_MARK = " [...] "  # between them
LINE_LIMIT = 2 * MAX_LINE + len(CUT_MARK)  # lines up to this are read whole
MAX_RECORD = 1 << 20  # a longer JSON record is not parsed (it is a long line)
MAX_RECORD_LINES = 20_000  # lines one record expands into
MAX_DEPTH = 16  # nesting of objects and arrays looked into for strings
# Fields a record's message sits in (a one-line message is a line of its own); any other string
# field is read only when it holds a newline (a traceback, a stack).
MESSAGE_KEYS = frozenset(
    (
        "message", "msg", "log", "error", "err", "error_message", "exception", "exc_info",
        "exc_text", "stack", "stack_trace", "stacktrace", "traceback", "event", "detail",
        "textpayload", "text", "reason", "description",
    )
)  # fmt: skip
# What may stand before the record: a timestamp, a container runtime's stream and tag
# ("2026-05-02T10:00:01.123456789Z stderr F "), kubectl's --prefix ("[pod/web-1/main] ").
_RECORD_PREFIX = re.compile(
    r"\s{0,8}(?:\[(?:pod|deployment|job)/[\w./-]{1,300}\]\s{1,4})?"
    r"(?:\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?\]?"
    r"\s{1,4}(?:[-|]\s{1,4})?)?"
    r"(?:(?:stdout|stderr)\s[FP]\s{1,4})?"
)
_PREFIX_MAX = 400


def clip_line(raw: str) -> str:
    """A line as read: whole up to LINE_LIMIT characters, else its first and last MAX_LINE."""
    if len(raw) <= LINE_LIMIT:
        return raw
    return raw[:MAX_LINE] + CUT_MARK + raw[-MAX_LINE:]


def may_hold_records(text: str) -> bool:
    """Whether a text can hold a JSON record (cheap, on the whole)."""
    return '{"' in text


def expand_records(
    numbered: Iterable[tuple[int, str]], wanted: Callable[[str], bool] = lambda raw: True
) -> Iterator[tuple[int, str]]:
    """The numbered lines, each JSON record among them replaced by its lines (same number): one
    with an escaped newline always, one on one line when ``wanted`` (see the module)."""
    for number, raw in numbered:
        lines = None
        if "\\n" in raw:
            lines = record_lines(raw)
        elif '{"' in raw[:_PREFIX_MAX] and raw.rstrip().endswith("}") and wanted(raw):
            lines = record_lines(raw, one_line=True)
        if lines is None:
            yield number, raw
        else:
            for line in lines:
                yield number, line


def record_lines(raw: str, one_line: bool = False) -> list[str] | None:
    """The lines a JSON log record holds (see the module), or None when ``raw`` is not one
    (or holds no newline and ``one_line`` is not asked for, or no message field: then it reads
    as it is)."""
    record = _record(raw)
    if record is None:
        return None
    lines, multiline = _held_lines(record)
    return lines[:MAX_RECORD_LINES] if (multiline or one_line) and lines else None


def _record(raw: str) -> dict[str, object] | None:
    """The JSON object a line holds after a prefix ``_RECORD_PREFIX`` allows; None for a line
    that is not one (or one longer than MAX_RECORD)."""
    brace = raw.find("{", 0, _PREFIX_MAX)
    if brace < 0 or len(raw) > MAX_RECORD or not raw.rstrip().endswith("}"):
        return None
    prefix = _RECORD_PREFIX.match(raw, 0, brace)
    if prefix is None or prefix.end() != brace:
        return None
    try:
        record = json.loads(raw[brace:])
    except (ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) else None


def _held_lines(record: dict[str, object]) -> tuple[list[str], bool]:
    """The lines of a record's strings (every one holding a newline, split at its newlines; the
    message fields' one-line strings), up to MAX_RECORD_LINES, and whether any held a newline."""
    lines: list[str] = []
    multiline = False
    for key, value in _strings(record, "", 0):
        if "\n" in value:
            multiline = True
            parts = value.split("\n")
            lines.extend(parts[:-1] if not parts[-1] else parts)
        elif key.lower() in MESSAGE_KEYS and value.strip():
            lines.append(value)
        if len(lines) >= MAX_RECORD_LINES:
            break
    return lines, multiline


def _strings(value: object, key: str, depth: int) -> Iterator[tuple[str, str]]:
    """(field name, string) of every string in a JSON value, in order, to MAX_DEPTH."""
    if isinstance(value, str):
        yield key, value
    elif depth >= MAX_DEPTH:
        return
    elif isinstance(value, dict):
        for name, item in value.items():
            yield from _strings(item, str(name), depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, key, depth + 1)
