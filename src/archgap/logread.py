"""A log read in bounded memory: whole, or past ``MAX_INPUT`` bytes its start and its end (where
the error is), with what was left out between counted (``archgap explain``'s input)."""

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
_CHUNK = 8 << 20


@dataclass(frozen=True)
class LogInput:
    """What was read of a log: all of it (``tail`` empty), or its start and its end."""

    head: str
    tail: str = ""
    skipped_bytes: int = 0
    skipped_lines: int = 0  # newlines in the part not read (line numbers after it stay true)

    def note(self, lines: int) -> str:
        """What was not read of a log of ``lines`` lines (its middle), for the report; ""."""
        if not self.skipped_bytes:
            return ""
        first = self.head.count("\n") + 1
        last = first + self.skipped_lines - 1
        return (
            f"the log is longer than {MAX_INPUT >> 20} MiB: its middle ({self.skipped_bytes:,} "
            f"bytes, lines {first}-{last} of {lines}) was not read; the first "
            f"{HEAD_BYTES >> 20} MiB and the last {TAIL_BYTES >> 20} MiB were (errors come last)"
        )


def read_log(stream: BinaryIO) -> LogInput:
    """A log from a binary stream, in bounded memory: past MAX_INPUT bytes the first HEAD_BYTES
    and the last TAIL_BYTES are kept (cut at line ends) and the newlines between are counted."""
    first = stream.read(MAX_INPUT)
    if len(first) < MAX_INPUT:
        return LogInput(first.decode("utf-8", "replace"))
    head = first[:HEAD_BYTES]
    # In _CHUNK pieces, so that the part dropped from the front of the tail is never large.
    chunks = [first[at : at + _CHUNK] for at in range(HEAD_BYTES, len(first), _CHUNK)]
    kept, skipped_bytes, skipped_lines = len(first) - HEAD_BYTES, 0, 0
    chunk = stream.read(_CHUNK)
    while chunk:
        chunks.append(chunk)
        kept += len(chunk)
        while kept - len(chunks[0]) >= TAIL_BYTES:  # drop whole chunks the tail no longer needs
            dropped = chunks.pop(0)
            kept -= len(dropped)
            skipped_bytes += len(dropped)
            skipped_lines += dropped.count(b"\n")
        chunk = stream.read(_CHUNK)
    if not skipped_bytes:
        return LogInput(b"".join([head, *chunks]).decode("utf-8", "replace"))
    tail = b"".join(chunks)
    cut = head.rfind(b"\n") + 1  # the head ends at a line end ...
    start = tail.find(b"\n") + 1  # ... and the tail starts at one
    skipped_bytes += len(head) - cut + start
    skipped_lines += 1 if start else 0
    return LogInput(
        head[:cut].decode("utf-8", "replace"),
        tail[start:].decode("utf-8", "replace"),
        skipped_bytes,
        skipped_lines,
    )


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
