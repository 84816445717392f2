"""The stdio transport with a cap on a frame: one JSON-RPC message per line, read in bounded
chunks, so that no line, however long, is ever held whole.

A frame longer than ``FRAME_CAP`` bytes is answered with a JSON-RPC error (id null: the id is in
the part that was never kept) as soon as it passes the cap, and the rest of it, up to its
newline, is read and dropped; the next line is the next frame. At no time does the server hold
more than the cap and one chunk of a frame.

As the SDK's own transport does, file descriptors 0 and 1 are pointed elsewhere while serving
(stdin at the null device, stdout at stderr): a child process or a stray print never reads or
writes the wire, which the server reaches through private duplicates.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

FRAME_CAP = 4 << 20  # bytes of one message, its newline not counted
CHUNK = 64 << 10
TOO_LARGE = -32600  # JSON-RPC "Invalid Request"


class Frames:
    """Splits a byte stream into lines, dropping each one over ``cap`` bytes: ``feed`` returns
    the frames it completes, with None where a frame passed the cap (once per frame)."""

    def __init__(self, cap: int = FRAME_CAP) -> None:
        self.cap = cap
        self.pending = bytearray()
        self.dropping = False

    def feed(self, chunk: bytes) -> list[bytes | None]:
        done: list[bytes | None] = []
        start = 0
        while start <= len(chunk):
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if not self.dropping and len(self.pending) + len(piece) > self.cap:
                self.pending.clear()  # never held beyond the cap
                self.dropping = True
                done.append(None)
            elif not self.dropping:
                self.pending += piece
            if end < 0:
                break
            if not self.dropping:
                done.append(bytes(self.pending))
            self.pending.clear()
            self.dropping = False
            start = end + 1
        return done

    def end(self) -> list[bytes | None]:
        """The last frame, when the stream ends without a newline."""
        last = bytes(self.pending)
        self.pending.clear()
        return [last] if last and not self.dropping else []


def too_large(cap: int) -> SessionMessage:
    error = types.ErrorData(
        code=TOO_LARGE,
        message=f"message refused: a frame over {cap} bytes (archgap mcp reads at most that)",
    )
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=None, error=error))


@asynccontextmanager
async def capped_stdio(
    cap: int = FRAME_CAP,
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """The (read, write) streams of a server on this process's stdin and stdout."""
    wire_in, wire_out, restore = _claim()
    inbound, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write, outbound = anyio.create_memory_object_stream[SessionMessage](0)
    errors = write.clone()  # the reader's own answers: frames over the cap
    reading = anyio.CancelScope()

    async def reader() -> None:
        frames = Frames(cap)
        with reading:
            async with inbound, errors:
                await _pump(wire_in, frames, inbound, errors)

    async def writer() -> None:
        async with outbound:
            async for message in outbound:
                line = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await anyio.to_thread.run_sync(_write, wire_out, line.encode() + b"\n")

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(reader)
            group.start_soon(writer)
            try:
                yield read, write
            finally:  # the server is done: stop reading; what it wrote still goes out
                reading.cancel()
                write.close()
    finally:
        restore()


async def _pump(
    fd: int,
    frames: Frames,
    inbound: MemoryObjectSendStream[SessionMessage | Exception],
    errors: MemoryObjectSendStream[SessionMessage],
) -> None:
    """Frames from ``fd`` to ``inbound`` until the stream ends; an answer to each frame over
    the cap to ``errors``."""
    while True:
        chunk = await anyio.to_thread.run_sync(_read, fd, abandon_on_cancel=True)
        for frame in frames.feed(chunk) if chunk else frames.end():
            if frame is None:
                await errors.send(too_large(frames.cap))
            elif frame.strip():
                await inbound.send(_message(frame))
        if not chunk:
            return


def _message(frame: bytes) -> SessionMessage | Exception:
    try:
        text = frame.decode("utf-8", errors="replace")
        message: Any = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except Exception as exc:  # the SDK's transport hands a bad line on as an exception too
        return exc
    return SessionMessage(message)


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, CHUNK)
    except OSError:
        return b""


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _claim() -> tuple[int, int, Any]:
    """Private duplicates of fds 0 and 1, which now point at the null device and stderr; and
    the function that points them back at the wire."""
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    os.dup2(2, 1)

    def restore() -> None:  # the private duplicates stay open: a reading thread may hold one
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)

    return wire_in, wire_out, restore
