"""The probe's one forked helper: results come back, failures mean 'do it here', no zombies."""

import os
import select
import time
from pathlib import Path

import pytest

from archgap.probe.forked import Send, in_two_processes
from tests.hangs import GUARD


def test_both_halves_run_and_the_child_result_comes_back() -> None:
    parent_pid = os.getpid()
    result, sent = in_two_processes(lambda _send: str(os.getpid()).encode(), lambda: "here")
    assert result == "here"
    assert sent is not None and int(sent) != parent_pid  # computed in another process


def test_what_the_child_sends_as_it_goes_is_heard_in_order_as_it_arrives() -> None:
    """A child's messages reach ``heard`` while it still works (the parent does not wait for
    the end): the child sends "first", then waits until the parent has heard it."""
    flag_r, flag_w = os.pipe()

    def child(send: Send) -> bytes:
        send(b"first,")
        # The parent writes the flag only once it has heard "first,"; a parent that waited for
        # the end would never write it: "late" after 10 s fails the test instead of a hang.
        ready, _, _ = select.select([flag_r], [], [], 10)
        return b"last" if ready else b"late"

    heard: list[bytes] = []

    def hear(chunk: bytes) -> None:
        heard.append(chunk)
        if b"".join(heard) == b"first,":
            os.write(flag_w, b"x")

    try:
        result, sent = in_two_processes(child, lambda: "here", hear)
    finally:
        os.close(flag_r)
        os.close(flag_w)
    assert (result, sent) == ("here", b"")  # every byte went to heard
    assert b"".join(heard) == b"first,last"


def test_a_failing_child_gives_none() -> None:
    def boom(_send: Send) -> bytes:
        raise RuntimeError("child failed")

    assert in_two_processes(boom, lambda: 1) == (1, None)


def test_a_failing_parent_propagates_and_the_child_is_reaped(tmp_path: Path) -> None:
    pid_file, woke = tmp_path / "child.pid", tmp_path / "child.woke"

    def child(_send: Send) -> bytes:
        pid_file.with_suffix(".tmp").write_text(str(os.getpid()))
        pid_file.with_suffix(".tmp").rename(pid_file)  # appears whole: never read half-written
        time.sleep(30)  # still running when the parent fails: must be killed, then reaped
        woke.write_text("the child ran to its end")
        return b"late"

    def parent() -> None:
        deadline = time.monotonic() + GUARD  # a hang guard: the child writes it at once
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        raise KeyError("parent failed")

    with pytest.raises(KeyError):
        in_two_processes(child, parent)
    assert pid_file.exists(), "the child never started"
    assert not woke.exists()  # did not wait for the child's 30 s
    with pytest.raises(ChildProcessError):  # already reaped: no zombie left
        os.waitpid(int(pid_file.read_text()), os.WNOHANG)
