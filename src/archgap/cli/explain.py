"""``archgap explain``: from an error log (file, stdin or a message) to the root cause and the fix.

Exit codes: 1 = an architecture-gap error was recognised and explained; 0 = no known
architecture-gap signature in the input (an error archgap does not know is printed as "unknown",
with what it recognised; a known error that is not an architecture gap, such as CUDA out of
memory or an NCCL failure, is named, with no architecture cause); 2 = usage or probe error (no
input, unreadable file, bad --gpu, unreadable --env-from, an unreachable host or a missing
interpreter there).

Every fact of the examined environment comes from the probe, on this machine or on the target
(--host/--container/--pod/--via): the Python environment, toolchains, GPUs and the raise sites the
log points at in one request, then the trace of the state the raising condition reads.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO

from archgap.cli import options as opt
from archgap.cli.common import (
    EXIT_GAP,
    EXIT_OK,
    Output,
    UsageError,
    target_from_args,
)

if TYPE_CHECKING:
    from archgap.analysis.explain import Diagnosis

MAX_INPUT = 64 * 1024 * 1024  # bytes of a log that are parsed; a longer log loses its middle
HEAD_BYTES = 8 << 20  # of a longer log: its start ...
TAIL_BYTES = MAX_INPUT - HEAD_BYTES  # ... and its end, where the error is (said so in the output)
CHUNK = 8 << 20


@dataclass(frozen=True)
class LogInput:
    """What was read of a log: all of it (``tail`` empty), or its start and its end."""

    head: str
    tail: str = ""
    skipped_bytes: int = 0
    skipped_lines: int = 0  # newlines in the part not read (line numbers after it stay true)


def read_log(stream: BinaryIO) -> LogInput:
    """A log from a binary stream, in bounded memory: past MAX_INPUT bytes the first HEAD_BYTES
    and the last TAIL_BYTES are kept (cut at line ends) and the newlines between are counted."""
    first = stream.read(MAX_INPUT)
    if len(first) < MAX_INPUT:
        return LogInput(first.decode("utf-8", "replace"))
    head = first[:HEAD_BYTES]
    # In CHUNK pieces, so that the part dropped from the front of the tail is never large.
    chunks = [first[at : at + CHUNK] for at in range(HEAD_BYTES, len(first), CHUNK)]
    kept, skipped_bytes, skipped_lines = len(first) - HEAD_BYTES, 0, 0
    chunk = stream.read(CHUNK)
    while chunk:
        chunks.append(chunk)
        kept += len(chunk)
        while kept - len(chunks[0]) >= TAIL_BYTES:  # drop whole chunks the tail no longer needs
            dropped = chunks.pop(0)
            kept -= len(dropped)
            skipped_bytes += len(dropped)
            skipped_lines += dropped.count(b"\n")
        chunk = stream.read(CHUNK)
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


HELP = "explain a crash log: the chain of causes and the fixes"
DESCRIPTION = (
    "Read an error log (file, '-' for stdin, or --message) and explain the architecture-gap error "
    "in it, confirmed on an environment when one is given."
)
OPTIONS = (
    opt.option("logfile", nargs="?", help="log file, or - for stdin"),
    opt.option("--message", metavar="TEXT", help="a bare error message instead of a log"),
    opt.gpu_option("the GPU of the crashed host"),
    opt.env_from_option(
        "the service's environment on the examined host: a process id (/proc/PID/environ), an env "
        "file (KEY=VALUE lines) or `docker inspect` JSON"
    ),
    opt.flag("--log-only", "do not examine any environment; the log alone"),
    opt.ENVIRONMENT,
    opt.output(),
    opt.TARGET,
)


def _read_input(args: argparse.Namespace) -> tuple[LogInput, str]:
    if args.message and args.logfile:
        raise UsageError("give a LOGFILE or --message, not both")
    if args.message:
        return LogInput(args.message), "--message"
    if not args.logfile:
        raise UsageError("give a LOGFILE, '-' for stdin, or --message TEXT")
    if args.logfile == "-":
        return read_log(sys.stdin.buffer), "stdin"
    try:
        with open(args.logfile, "rb") as f:
            return read_log(f), args.logfile
    except OSError as exc:
        raise UsageError(f"cannot read {args.logfile}: {exc.strerror or exc}") from exc


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.analysis.compat import UnknownGpu, resolve_gpu
    from archgap.api import ProbeError, Where, diagnose
    from archgap.report.explain import body

    text, origin = _read_input(args)
    named = [v.strip() for value in args.gpu for v in value.split(",") if v.strip()]
    try:
        for name in named:  # a bad GPU name fails before anything is probed, then a bad target
            resolve_gpu(name)
        target = target_from_args(args)
        label = "reading the log" if args.log_only else f"examining {target.name}"
        with out.status(label):
            where = Where(args.python, target, args.env_from, args.root, args.timeout)
            examined = None if args.log_only else where
            diagnosis, log = diagnose(text.head, text.tail, text.skipped_lines, named, examined)
    except UnknownGpu as exc:
        raise UsageError(str(exc)) from exc
    except ProbeError as exc:
        raise UsageError(str(exc)) from exc
    if out.json_mode:
        skipped = {"bytes": text.skipped_bytes, "lines": text.skipped_lines}
        out.emit("explain", body(diagnosis, origin, log.lines, log.truncated_lines, skipped))
    else:
        _print(out, diagnosis, origin, log.lines)
        if text.skipped_bytes:
            out.print(f"\n[bold yellow]note[/] {_skipped_note(text, log.lines)}")
    return EXIT_GAP if diagnosis.status == "diagnosed" else EXIT_OK


def _skipped_note(text: LogInput, lines: int) -> str:
    first = text.head.count("\n") + 1
    last = first + text.skipped_lines - 1
    return (
        f"the log is longer than {MAX_INPUT >> 20} MiB: its middle ({text.skipped_bytes:,} "
        f"bytes, lines {first}-{last} of {lines}) was not read; the first {HEAD_BYTES >> 20} MiB "
        f"and the last {TAIL_BYTES >> 20} MiB were (errors come last)"
    )


_STATUS_LABEL = {
    "confirmed": "[green]confirmed[/]",
    "from-log": "[cyan]from log[/]",
    "knowledge": "[yellow]knowledge base[/]",
    "unconfirmed": "[red]unconfirmed[/]",
}


_CAUSE_LABEL = {
    "conditional": " [yellow](conditional)[/]",
    "undetermined": " [red](not determined for this version)[/]",
}


def _next_step(diagnosis: Diagnosis) -> str:
    """What to do first, for the first lines: settle the fact that decides, else the first fix."""
    if diagnosis.decide and diagnosis.cause_status in ("conditional", "undetermined"):
        return f"find out {diagnosis.decide[0]}"
    if diagnosis.fixes:
        return diagnosis.fixes[0].text
    return "nothing to fix (see the root cause)" if diagnosis.root_cause else ""


def _print_unrecognised(out: Output, diagnosis: Diagnosis) -> None:
    """No signature matched: what the log states, for a person to go on."""
    from rich.markup import escape

    label = "unknown error" if diagnosis.status == "unknown" else "no error found"
    out.print(f"\n[bold yellow]{label}[/]: no known architecture-gap signature matches.")
    rec = diagnosis.recognised
    if rec.error:
        out.print(f"  last error: {escape(rec.error)}")
    for label, values in (
        ("GPUs", rec.gpus),
        ("compute capabilities", rec.compute_capabilities),
        ("versions", tuple(f"{k} {v}" for k, v in rec.versions)),
        ("paths", tuple(f"{k}={v}" for k, v in rec.paths)),
        ("frames", rec.frames[-5:]),
    ):
        if values:
            out.print(f"  {label}: {escape(', '.join(values))}")


def _print(out: Output, diagnosis: Diagnosis, origin: str, lines: int) -> None:
    from rich.markup import escape

    where = diagnosis.environment or "no environment (log only)"
    plural = "line" if lines == 1 else "lines"
    out.print(
        f"[bold]archgap explain[/] {escape(origin)} ({lines} {plural}) — examined: {escape(where)}"
    )
    if diagnosis.status == "not-architecture":
        out.print(
            f"\n[bold yellow]not an architecture gap[/] {escape(diagnosis.error)}  "
            f"[dim]({diagnosis.signature})[/]"
        )
        for note in diagnosis.notes:
            out.print(f"  {escape(note)}")
        return
    if diagnosis.status != "diagnosed":
        _print_unrecognised(out, diagnosis)
        return
    first = _next_step(diagnosis)
    if first:
        out.print(f"[bold]next:[/] {escape(first)}")
    out.print(f"\n[bold red]error[/] {escape(diagnosis.error)}  [dim]({diagnosis.signature})[/]")
    if diagnosis.tool:
        out.print(f"  raised by {escape(diagnosis.tool)}")
    for note in diagnosis.notes:
        out.print(f"\n[bold yellow]note[/] {escape(note)}")
    out.print("\n[bold]chain[/]")
    for number, step in enumerate(diagnosis.steps, start=1):
        location = f" [bold]{escape(step.location)}[/]" if step.location else ""
        out.print(f" {number:>2}. {escape(step.text)}{location}  {_STATUS_LABEL[step.status]}")
        if step.fact:
            out.print(f"     [dim]{escape(step.fact)}[/]")
        out.print(f"     [dim]source: {escape(step.source)}[/]")
    label = _CAUSE_LABEL.get(diagnosis.cause_status, "")
    out.print(f"\n[bold]root cause[/]{label} {escape(diagnosis.root_cause)}")
    for case in diagnosis.cases:  # a conditional cause: one bullet per case
        out.print(f"  - {escape(case.when)}: {escape(case.cause)}")
        for text in case.fixes:
            out.print(f"      fix: {escape(text)}")
    if diagnosis.decide:
        out.print("\n[bold]what would decide it[/]")
        for item in diagnosis.decide:
            out.print(f"  - {escape(item)}")
    if diagnosis.fixes:
        out.print("\n[bold]fixes[/] (least invasive first)")
        for number, fix in enumerate(diagnosis.fixes, start=1):
            out.print(f" {number}. {escape('[' + fix.kind + ']')} {escape(fix.text)}")
            out.print(f"    [dim]{escape(fix.source)}[/]")
