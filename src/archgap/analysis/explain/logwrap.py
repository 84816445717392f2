"""A message the terminal or an editor wrapped, read as the one line its writer printed.

Pure. A long line pasted from a terminal is cut at the terminal's width wherever that falls (in
a word: ``...with the cur`` / ``rent PyTorch installation.``); one wrapped by an editor, a
forum or ``textwrap`` is cut at a space, the space dropped, the rest often indented. Either way
a signature or an evidence pattern that spans the cut (``is not compatible with the current
PyTorch installation``, an arch list ``sm_50 ... sm_90``) sees neither half. ``Unwrapped`` joins a
line with the lines that continue it, numbered as the first:

- the first line is as long as a wrapped one (``MIN_WRAPPED`` to ``MAX_WRAPPED`` characters)
  and does not end complete (a sentence's ``.``, ``!``, ``?``, ``:``, ``;``, a closing quote or
  bracket); it is not a traceback's frame line or the code line under one;
- the next line has text and starts no record of its own: no traceback, frame, exception
  (``RuntimeError:``), caret line, log prefix (a timestamp, a level, a rank, a worker), quote
  compiler's line (``ptxas ...``, ``nvcc fatal``) or label (``FAILED:``, ``Note:``);
- a width explains the cut (``TERMINAL_WIDTHS``): the first line is exactly that wide, or it
  fits within it and the next line's first word would not have (a line that merely ends without
  a full stop, ``...on the device`` then ``CUDA kernel errors might be ...``, is not wrapped);
- the joiner: none where the first line is exactly a terminal's width (``TERMINAL_WIDTHS``) and
  the rest goes on inside a word (a letter that is not a capital, a digit, ``_``): the width cut
  the text, every character kept; else a space (either side has one at the cut, or an editor
  dropped it; ``...used to compile`` / ``PyTorch (11.8)``, a source's own line of 80, is two
  words).

At most ``MAX_JOINED`` lines are joined into one, and never past ``LINE_LIMIT`` characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from archgap.analysis.explain.logrecords import LINE_LIMIT

MIN_WRAPPED = 60  # a shorter line was not wrapped (terminals are 80 columns or wider) ...
MAX_WRAPPED = 512  # ... nor a longer one (no terminal or editor wraps that wide)
MAX_JOINED = 8  # physical lines joined into one
# The widths a wrap is recognised at: a terminal's default 80 columns and the usual wider
# settings, an editor's 79. A line of exactly this length may have been cut inside a word.
TERMINAL_WIDTHS = frozenset((79, 80, 100, 120, 132, 160, 200))
_ANSI = re.compile(r"\x1b\[[0-9;?]{0,32}[ -/]{0,4}[@-~]")
# A line ending so is complete: a sentence, or a quoted or bracketed item (a pasted message).
_SENTENCE_END = (".", "!", "?", ":", ";", "`", "'", '"', ")", "]", "}", "|")
_FRAME = re.compile(r'\s*File "[^"]{1,1000}", line \d')
# What starts a record of its own (so it continues nothing): tracebacks and their lines, an
# exception or a warning's type, carets, a prefix ``logparse.strip_line`` peels (a bracket, a
# parenthesis, a quote, a timestamp, a level word, glog's I0102), a list item, a Windows path
# (the command after ninja's FAILED:); indented or not.
_RECORD_START = re.compile(
    r"[\[(>{<#*|+-]"  # at the line's start only: an indented "(8.0) - (12.0)" goes on
    r"|\s*(?:Traceback \(|File \"|During handling|The above exception|[~^]+\s*$|[A-Za-z]:[\\/]"
    r"|\d{4}-\d{2}-\d{2}|\d{2}-\d{2} \d{2}:"
    r"|(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|NOTE|HINT)\b"
    r"|[IWEF]\d{4} "
    r"|[A-Za-z_][\w.]{0,120}(?:Error|Exception|Warning|Interrupt|Exit|Failure)\b"
    r"|[\w.-]{1,40} ?(?:fatal|error|warning)\s*:"
    r"|[A-Z][\w-]{0,30}:(?:\s|$)"
    r"|(?:ptxas|nvcc|nvlink|nvrtc|fatbinary|cicc|ninja|cmake|make|gcc|g\+\+|c\+\+|ld|collect2)\b)",
)


def _visible(raw: str) -> str:
    return _ANSI.sub("", raw) if "\x1b" in raw else raw


def _may_continue(line: str) -> bool:
    """Whether a line may go on on the next one: long, and not the end of a sentence."""
    text = _visible(line).rstrip("\r")
    if not MIN_WRAPPED <= len(text) <= MAX_WRAPPED:
        return False
    return not text.rstrip().endswith(_SENTENCE_END)


def _continues(line: str) -> bool:
    """Whether a line can be the rest of the one before it (it starts no record of its own)."""
    text = _visible(line)
    return bool(text.strip()) and not _RECORD_START.match(text)


def _in_word(last_piece: str, rest: str) -> bool:
    """Whether a terminal's width cut a word: the line is exactly a width and the rest goes on
    inside a word (a letter that is not a capital, a digit, ``_``)."""
    width = len(_visible(last_piece).rstrip("\r"))
    start = rest[:1]
    return width in TERMINAL_WIDTHS and (start.isalnum() or start == "_") and not start.isupper()


def _wrapped_at(last_piece: str, rest: str) -> bool:
    """Whether ``rest`` is where a width wrapped ``last_piece``: a terminal's cut inside a word,
    or a wrap at a space: for some width the line fits and the next line's first word would
    not have (an editor fills a line up to its width). A line that begins as the one before
    does (``vllm-1  |`` of docker compose, a repeated ``ptxas``) is the next record."""
    if _in_word(last_piece, rest):
        return True
    first, word = _visible(last_piece).split(maxsplit=1)[0], _visible(rest).split(maxsplit=1)[0]
    if word == first:
        return False
    width = len(_visible(last_piece).rstrip())
    return any(width <= w < width + 1 + len(word) for w in TERMINAL_WIDTHS)


def _joined(first: str, last_piece: str, rest: str) -> str:
    """``first`` (whose last physical line is ``last_piece``) and ``rest`` as one line."""
    if _in_word(last_piece, rest):
        return first + rest  # a terminal's hard wrap inside a word: every character kept
    return first.rstrip() + " " + rest.strip()


def _is_frame(raw: str) -> bool:
    """Whether a line is a traceback's frame line (``File "...", line N``)."""
    return 'File "' in raw and bool(_FRAME.match(raw))


def _goes_on(start: int, text: str, pieces: int, last_piece: str, number: int, raw: str) -> bool:
    """Whether line ``number``, ``raw``, continues ``text``, the line begun at ``start`` from
    ``pieces`` physical lines, the last ``last_piece``: it is the next line, within MAX_JOINED
    lines and LINE_LIMIT characters, starts no record of its own, and a width wrapped there."""
    return (
        pieces < MAX_JOINED
        and number == start + pieces
        and len(text) + len(raw) <= LINE_LIMIT
        and _continues(raw)
        and _wrapped_at(last_piece, raw)
    )


class Unwrapped:
    """The numbered lines, each wrapped message joined into its first line (see the module);
    ``last`` is the number of the last physical line read (a joined line carries its first)."""

    def __init__(self, numbered: Iterable[tuple[int, str]]) -> None:
        self.numbered = numbered
        self.last = 0

    def __iter__(self) -> Iterator[tuple[int, str]]:
        pending: tuple[int, str] | None = None  # a line that may go on on the next one
        last_piece, pieces = "", 0
        after_frame = False  # the line before was a traceback's frame line (this, its code)
        number = 0
        try:
            for number, raw in self.numbered:
                if pending is None and len(raw) < MIN_WRAPPED:  # most lines: short, no wrap
                    after_frame = _is_frame(raw)
                    yield number, raw
                    continue
                if pending is not None:
                    start, text = pending
                    pending = None
                    if _goes_on(start, text, pieces, last_piece, number, raw):
                        text = _joined(text, last_piece, raw)
                        last_piece, pieces = raw, pieces + 1
                        if _may_continue(raw):
                            pending = (start, text)
                        else:
                            after_frame = False
                            yield start, text
                        continue
                    yield start, text
                is_frame = _is_frame(raw)
                if not after_frame and not is_frame and _may_continue(raw):
                    pending, last_piece, pieces = (number, raw), raw, 1
                    continue
                after_frame = is_frame
                yield number, raw
            if pending is not None:
                yield pending
        finally:
            self.last = number
