"""Work shared with one forked helper process (the probe's only parallelism, stdlib, POSIX).

Reading files is system calls and memory copies: on two cores a forked child doing half of them
halves the wall time. The child sends its result back as bytes through a pipe; it is always
waited for (killed if this process is interrupted), and any failure only means no child result.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Callable, Optional, Tuple, TypeVar

T = TypeVar("T")


def in_two_processes(
    child_work: Callable[[], bytes], parent_work: Callable[[], T]
) -> Tuple[T, Optional[bytes]]:
    """(``parent_work()``, the bytes ``child_work()`` returned in a forked child, or None).

    None when the child could not be started or failed: the caller then does its part itself.
    Exceptions of ``parent_work`` propagate, after the child has been stopped and reaped.
    """
    try:
        read_end, write_end = os.pipe()
    except OSError:
        return parent_work(), None
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return parent_work(), None
    if pid == 0:  # the child: never returns into the caller's code, skips cleanup handlers
        status = 1
        try:
            os.close(read_end)
            view = memoryview(child_work())
            while view:
                view = view[os.write(write_end, view) :]
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    reaped = False
    try:
        result = parent_work()
        chunks = []
        try:
            chunk = os.read(read_end, 1 << 20)
            while chunk:
                chunks.append(chunk)
                chunk = os.read(read_end, 1 << 20)
        except OSError:
            chunks = []
        _, status = os.waitpid(pid, 0)
        reaped = True
        return result, (b"".join(chunks) if status == 0 and chunks else None)
    finally:
        with contextlib.suppress(OSError):
            os.close(read_end)
        if not reaped:  # interrupted: stop the helper, leave no zombie
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)
