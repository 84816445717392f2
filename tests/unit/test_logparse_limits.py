"""The log reader's bounds and its less common shapes: Python logging's level after a prefix,
a traceback deeper than MAX_FRAMES, a JSON record that is not valid JSON or holds more lines
than MAX_RECORD_LINES, and a flood of more distinct quiet lines than the reader remembers."""

from __future__ import annotations

import json

import pytest

from archgap.analysis.explain.logparse import _QUIET_CACHE, MAX_FRAMES, parse_log, strip_line
from archgap.analysis.explain.logrecords import MAX_RECORD_LINES, record_lines


def test_python_loggings_level_is_the_lines_level_after_its_prefix() -> None:
    # logging's "%(asctime)s - %(levelname)s - %(message)s" (the logging cookbook's format)
    assert strip_line("2026-11-28 10:00:01,123 - ERROR - CUDA error: no kernel image") == (
        "",
        "ERROR",
        "CUDA error: no kernel image",
    )
    # "%(levelname)s - %(message)s" after a worker's prefix, which names the worker
    assert strip_line("(VllmWorker rank=1 pid=3) WARNING - sm_120 is not in the list") == (
        "VllmWorker rank=1 pid=3",
        "WARNING",
        "sm_120 is not in the list",
    )
    # a level the vLLM prefix already gave stays the line's
    assert strip_line("ERROR 09-06 23:28:45 [core.py:714] INFO - engine stopped") == (
        "",
        "ERROR",
        "engine stopped",
    )


@pytest.mark.parametrize("with_code", [True, False], ids=["code-lines", "frames-only"])
def test_a_traceback_deeper_than_max_frames_keeps_its_outermost_frames(with_code: bool) -> None:
    depth = MAX_FRAMES + 50
    lines = ["Traceback (most recent call last):"]
    for i in range(depth):
        lines.append(f'  File "/app/m{i}.py", line {i + 1}, in f{i}')
        if with_code:
            lines.append(f"    f{i + 1}()")
    lines.append("RecursionError: maximum recursion depth exceeded")
    (traceback,) = parse_log("\n".join(lines) + "\n").tracebacks
    assert traceback.exception_type == "RecursionError"
    assert traceback.message == "maximum recursion depth exceeded"
    # the first MAX_FRAMES frames, in the order printed (outermost first); the rest dropped
    assert len(traceback.frames) == MAX_FRAMES
    assert [f.file for f in traceback.frames] == [f"/app/m{i}.py" for i in range(MAX_FRAMES)]
    last = traceback.frames[-1]
    assert (last.line, last.function) == (MAX_FRAMES, f"f{MAX_FRAMES - 1}")
    assert last.code == (f"f{MAX_FRAMES}()" if with_code else "")


@pytest.mark.parametrize(
    "raw",
    [
        # RFC 8259 section 4: no comma after an object's last member
        '{"level": "error", "msg": "CUDA error\\nno kernel image",}',
        # nesting deeper than the JSON decoder recurses (it raises RecursionError)
        '{"a": ' * 100_000 + '"x\\ny"' + "}" * 100_000,
    ],
    ids=["trailing-comma", "nested-past-recursion"],
)
def test_a_line_that_is_not_a_json_record_is_read_as_it_is(raw: str) -> None:
    assert record_lines(raw) is None
    assert record_lines(raw, one_line=True) is None
    log = parse_log("INFO start\n" + raw + "\n")
    assert log.lines == 2


def test_a_record_holds_at_most_max_record_lines_lines() -> None:
    held = [f"step {i} failed" for i in range(MAX_RECORD_LINES + 500)]
    raw = json.dumps({"level": "error", "exc_info": "\n".join(held)})
    assert record_lines(raw) == held[:MAX_RECORD_LINES]


def test_more_distinct_quiet_lines_than_remembered_leave_the_loud_ones_read() -> None:
    # the reader remembers the kind of _QUIET_CACHE distinct lines, then forgets them all: the
    # line that finds the memory full (a new warning) and one remembered before (the first
    # warning again) are read as warnings all the same, every line numbered
    first, second = "UserWarning: TORCH_CUDA_ARCH_LIST is not set", "UserWarning: sm_120 unlisted"
    quiet = [f"step {i} done" for i in range(_QUIET_CACHE - 1)]
    log = parse_log("\n".join([first, *quiet, second, first]) + "\n")
    assert log.lines == len(quiet) + 3
    assert [(w.text, w.count) for w in log.warnings] == [(first, 2), (second, 1)]
