"""Work shared with one forked helper process (the probe's only parallelism, stdlib, POSIX).

Reading files is system calls and memory copies: on two cores a forked child doing half of them
halves the wall time. The child sends its result back as bytes through a pipe; it is always
waited for (killed if this process is interrupted), and any failure only means no child result.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar

T = TypeVar("T")
# Signals that end archgap: while a helper runs they first stop and reap it.
ENDING_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)


class _Ended(BaseException):
    """SIGTERM or SIGHUP arrived while a helper ran (raised so that cleanup runs)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_ended(signum: int, _frame: Any) -> None:
    raise _Ended(signum)


def _catch_ending_signals() -> Dict[int, Any]:
    """Make SIGTERM/SIGHUP raise in this process (main thread only); returns the old handlers.
    A signal this process ignores (SIGHUP under nohup) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous: Dict[int, Any] = {}
    for signum in ENDING_SIGNALS:
        with contextlib.suppress(OSError, ValueError):
            if signal.getsignal(signum) != signal.SIG_IGN:
                previous[signum] = signal.signal(signum, _raise_ended)
    return previous


def _block(how: Any) -> None:
    if hasattr(signal, "pthread_sigmask"):
        with contextlib.suppress(OSError, ValueError):
            signal.pthread_sigmask(how, ENDING_SIGNALS)


def _restore(previous: Dict[int, Any]) -> None:
    for signum, handler in previous.items():
        with contextlib.suppress(OSError, ValueError, TypeError):
            signal.signal(signum, handler)


Send = Callable[[bytes], None]  # the child's bytes to the parent, as they come


def fork_safe() -> bool:
    """Whether this process may fork a helper: POSIX, and no other threads (a child forked from
    a process with threads can deadlock on a lock another thread held)."""
    return hasattr(os, "fork") and threading.active_count() == 1


def in_two_processes(
    child_work: Callable[[Send], bytes],
    parent_work: Callable[[], T],
    heard: Optional[Send] = None,
) -> Tuple[T, Optional[bytes]]:
    """(``parent_work()``, the bytes ``child_work(send)`` sent and returned in a forked child,
    or None).

    None when the child could not be started or failed: the caller then does its part itself.
    With ``heard``, each chunk the child writes is handed to it as it arrives, from the time
    ``parent_work`` returns (b"" then stands for the bytes). Exceptions of ``parent_work``
    propagate, after the child has been stopped and reaped.
    """
    try:
        read_end, write_end = os.pipe()
    except OSError:
        return parent_work(), None
    # SIGTERM/SIGHUP wait (blocked) until each side has its handlers: the parent's reap the
    # helper, the child's are the defaults.
    _block(signal.SIG_BLOCK)
    try:
        pid = os.fork()
    except OSError:
        _block(signal.SIG_UNBLOCK)
        os.close(read_end)
        os.close(write_end)
        return parent_work(), None
    if pid == 0:  # the child: never returns into the caller's code, skips cleanup handlers
        status = 1
        try:
            for signum in ENDING_SIGNALS:
                signal.signal(signum, signal.SIG_DFL)
            _block(signal.SIG_UNBLOCK)
            os.close(read_end)

            def send(data: bytes) -> None:
                view = memoryview(data)
                while view:
                    view = view[os.write(write_end, view) :]

            send(child_work(send))
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    reaped = False
    previous = _catch_ending_signals()
    ended: Optional[_Ended] = None
    try:
        _block(signal.SIG_UNBLOCK)
        result = parent_work()
        chunks: List[bytes] = []
        try:
            chunk = os.read(read_end, 1 << 20)
            while chunk:
                if heard is None:
                    chunks.append(chunk)
                else:
                    heard(chunk)
                chunk = os.read(read_end, 1 << 20)
        except OSError:
            status = -1
        else:
            _, status = os.waitpid(pid, 0)
            reaped = True
        return result, (b"".join(chunks) if status == 0 else None)
    except _Ended as exc:
        ended = exc
        raise
    finally:
        with contextlib.suppress(OSError):
            os.close(read_end)
        if not reaped:  # interrupted: stop the helper, leave no zombie
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)
        _restore(previous)
        if ended is not None:  # the helper is gone: now end as the signal asked
            os.kill(os.getpid(), ended.signum)
            raise SystemExit(128 + ended.signum) from None  # the old handler did not end us
