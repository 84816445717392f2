"""A log read in bounded memory: whole, or past ``MAX_INPUT`` bytes its start and its end (where
the error is), with what was left out between counted (``archgap explain``'s input).

A line the unread middle cuts is kept by its ends, not dropped: the start of the line where the
middle begins (up to ``LINE_END_BYTES``) and the end of the line where it ends (the same, where
an error written on one long line is), one line when the middle holds no newline (a single 2 GB
line is line 1 of 1, read by its first and last bytes)."""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from typing import BinaryIO

from archgap.errors import UsageError

MAX_INPUT = 64 * 1024 * 1024  # bytes of a log that are parsed; a longer log loses its middle
HEAD_BYTES = 8 << 20  # of a longer log: its start ...
TAIL_BYTES = MAX_INPUT - HEAD_BYTES  # ... and its end, where the error is (said so in the output)
LINE_END_BYTES = 4096  # of a line the middle cuts: its start and its end kept (as explain's lines)
CUT_MARK = b" [...] "  # between the two ends of a line whose middle was not read
_CHUNK = 8 << 20


@dataclass(frozen=True)
class LogInput:
    """What was read of a log: all of it (``tail`` empty), or its start and its end."""

    head: str
    tail: str = ""
    skipped_bytes: int = 0
    skipped_lines: int = 0  # lines wholly or partly in the part not read (for the report)
    first_skipped: int = 0  # the first of them (1-based; 0: nothing was skipped)
    gap_lines: int = 0  # the tail's first line is numbered (lines of head) + gap_lines + 1

    def note(self, lines: int) -> str:
        """What was not read of a log of ``lines`` lines (its middle), for the report; ""."""
        if not self.skipped_bytes:
            return ""
        first = self.first_skipped
        last = first + self.skipped_lines - 1
        return (
            f"the log is longer than {MAX_INPUT >> 20} MiB: its middle ({self.skipped_bytes:,} "
            f"bytes, lines {first}-{last} of {lines}) was not read; the first "
            f"{HEAD_BYTES >> 20} MiB and the last {TAIL_BYTES >> 20} MiB were (errors come last)"
        )


def read_log(stream: BinaryIO) -> LogInput:
    """A log from a binary stream, in bounded memory: past MAX_INPUT bytes the first HEAD_BYTES
    and the last TAIL_BYTES are kept and the newlines between are counted; the lines the middle
    cuts keep their ends (``LINE_END_BYTES`` each)."""
    head = stream.read(HEAD_BYTES)
    # In _CHUNK pieces, so that the part dropped from the front of the tail is never large.
    chunks: list[bytes] = []
    kept, skipped_bytes, skipped_newlines, ends_line = 0, 0, 0, False
    while chunk := stream.read(_CHUNK):
        chunks.append(chunk)
        kept += len(chunk)
        while kept - len(chunks[0]) >= TAIL_BYTES:  # drop whole chunks the tail no longer needs
            dropped = chunks.pop(0)
            kept -= len(dropped)
            skipped_bytes += len(dropped)
            skipped_newlines += dropped.count(b"\n")
            ends_line = dropped.endswith(b"\n")
    if not skipped_bytes:
        return LogInput(_text(b"".join([head, *chunks])))
    return _ends(head, chunks, skipped_bytes, skipped_newlines, ends_line)


def _ends(
    head: bytes, chunks: list[bytes], skipped: int, newlines: int, ends_line: bool
) -> LogInput:
    """The read parts of a log whose middle (``skipped`` bytes holding ``newlines`` newlines,
    its last byte a newline when ``ends_line``) was not read, its tail in ``chunks`` (emptied):
    line X, where the middle begins, keeps its start; line Y, where it ends, its end; X = Y is
    one line, its two ends joined."""
    cut = head.rfind(b"\n") + 1
    started = head[cut : cut + LINE_END_BYTES]  # line X's start ("": X begins in the middle)
    skipped += len(head) - cut - len(started)
    first = head.count(b"\n") + 1  # X
    last = first + newlines - (1 if ends_line else 0)  # Y
    ending = b""
    if not ends_line:  # the tail begins inside line Y: its end, up to its newline (or the end)
        ending, before = _cut_line_end(chunks)
        skipped += before - len(ending)
    tail_first = last if not ends_line else last + 1
    rest = bytearray()
    while chunks:  # the rest of the tail, chunk by chunk (never two copies of it)
        rest += chunks.pop(0)
    report = (skipped, last - first + 1, first)
    if first == last and started and not ends_line:
        return LogInput(_text(head[:cut] + started + CUT_MARK + ending) + _text(rest), "", *report)
    head_lines = first - (0 if started else 1)
    return LogInput(
        _text(head[:cut] + started),
        _text(ending) + _text(rest),
        *report,
        tail_first - head_lines - 1,
    )


def _cut_line_end(chunks: list[bytes]) -> tuple[bytes, int]:
    """Remove from ``chunks`` the bytes before the first newline; their last LINE_END_BYTES
    (the end of the line they close) and how many there were."""
    pieces: list[bytes] = []
    count = 0
    while chunks:
        at = chunks[0].find(b"\n")
        if at >= 0:
            pieces.append(chunks[0][:at])
            chunks[0] = chunks[0][at:]
            count += at
            break
        count += len(chunks[0])
        pieces.append(chunks.pop(0))
        while len(pieces) > 1 and sum(map(len, pieces[1:])) >= LINE_END_BYTES:
            pieces.pop(0)  # keep only what the line's last bytes need
    return b"".join(pieces)[-LINE_END_BYTES:] if count else b"", count


def _text(data: bytes | bytearray) -> str:
    return data.decode("utf-8", "replace")


def read_input(logfile: str | None, message: str | None) -> tuple[LogInput, str]:
    """The log to explain and where it came from: a file (``-``: stdin) or a bare message;
    ``UsageError`` for neither, both, or a file that cannot be read."""
    if message and logfile:
        raise UsageError("give a LOGFILE or --message, not both")
    if message:
        return LogInput(message), "--message"
    if not logfile:
        raise UsageError("give a LOGFILE, '-' for stdin, or --message TEXT")
    if logfile == "-":
        return read_log(sys.stdin.buffer), "stdin"
    try:  # O_NONBLOCK: a FIFO named as the log must not block the open (it is refused)
        with os.fdopen(os.open(logfile, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise OSError("not a regular file (a log in a pipe: give it as '-', stdin)")
            return read_log(f), logfile
    except OSError as exc:
        raise UsageError(f"cannot read {logfile}: {exc.strerror or exc}") from exc
