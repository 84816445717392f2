"""Hostile corpus: the logs ``archgap explain`` reads. A log is data written by whatever ran, in
whatever shape its logger chose; each class is one such shape, built here, with its outcome.

The rules that decide the outcomes:
* A JSON log record (one JSON object a line, alone or after a timestamp and a container
  runtime's ``stderr F``, as Kubernetes, Docker and JSON loggers write them) holds its traceback
  in a string field with its newlines escaped (RFC 8259 section 7: a newline in a string is
  written ``\\n``). Decoded, it is the same traceback a plain log shows, so it is explained the
  same: the error recognised, on the record's own line number.
* Errors come last: a line too long to read whole is read by its start and its end, so an error
  at the end of a long line (a progress bar, a traceback flattened onto one line) is recognised.
* A GPU is stated in words (a message, nvidia-smi's or torch's banner), never by a path: a
  GPU-like word in a file path, a URL or a traceback frame's line (``File "/srv/t4/main.py"``)
  is not a GPU the log states; the GPU the same log states in prose still is.
* A log of one 2 GiB line (a sparse file: nothing is written) is one line: the report counts 1
  line, says the unread middle lies in line 1 of 1, recognises the error at the line's end, and
  the reader's peak RSS grows by far less than the line (it is never held).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import json_output, run_cli

GIB = 1 << 30
ERROR = "RuntimeError: FlashInfer requires GPUs with sm75 or higher"
SIGNATURE = "flashinfer-sm75-gate"
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/opt/venv/lib/python3.12/site-packages/sglang/launch_server.py", line 14, in main\n'
    "    run_server(args)\n"
    '  File "/opt/venv/lib/python3.12/site-packages/flashinfer/jit/core.py", line 88, in check\n'
    "    check_cuda_arch()\n"
    f"{ERROR}\n"
)


def explain(log: Path) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    result = run_cli("explain", str(log), "--log-only", "--json")
    return json_output(result, "explain")["explain"], result


# ------------------------------------------------------------------ JSON records, long lines
@dataclass(frozen=True)
class Shape:
    lines: Callable[[], list[str]]  # the log's lines
    traceback: bool  # the error is a traceback's (read as one, its frames known)
    line: int = 2  # the line the error (its traceback) is on (1-based)


def _python_json_logger() -> list[str]:
    record = {"asctime": "2026-05-02 10:00:01", "levelname": "ERROR", "name": "sglang",
              "message": "Scheduler failed", "exc_info": TRACEBACK.rstrip("\n")}  # fmt: skip
    return ['{"levelname": "INFO", "message": "starting"}', json.dumps(record)]


def _structlog() -> list[str]:
    record = {"event": "engine failed", "level": "error", "exception": TRACEBACK}
    return ["plain start line", json.dumps(record, separators=(",", ":"))]


def _kubernetes_cri() -> list[str]:
    record = {"ts": 1777716001.1, "msg": "worker died", "stack_trace": TRACEBACK}
    return [
        "2026-05-02T10:00:00.000000001Z stdout F booting",
        "2026-05-02T10:00:01.123456789Z stderr F " + json.dumps(record),
    ]


def _timestamp_then_record() -> list[str]:
    record = {"level": "error", "error": {"kind": "RuntimeError", "stack": TRACEBACK}}
    return ["[2026-05-02 10:00:00] up", "[2026-05-02 10:00:01] " + json.dumps(record)]


def _docker_json_file() -> list[str]:
    # Docker's json-file driver: one record per line of output, each ending in its newline.
    records = [{"log": line + "\n", "stream": "stderr", "time": "2026-05-02T10:00:01Z"}
               for line in ("INFO starting", *TRACEBACK.splitlines())]  # fmt: skip
    return [json.dumps(r) for r in records]


def _long_line_ending_in_the_error() -> list[str]:
    return ["INFO loading", "Loading shards: " + "#" * 50_000 + " 100% " + ERROR]


def _flattened_traceback() -> list[str]:
    frames = ' File "/srv/app/step.py", line 7, in step;' * 2_000
    return ["INFO up", "worker 3 failed: Traceback (most recent call last):" + frames + " " + ERROR]


def _long_json_record() -> list[str]:
    # A record of 100 KB: a large context field, then the traceback.
    record = {"message": "failed", "context": "x" * 100_000, "exc_info": TRACEBACK}
    return ["start", json.dumps(record)]


SHAPES = {
    "json-logger-exc-info": Shape(_python_json_logger, True),
    "structlog-exception": Shape(_structlog, True),
    "kubernetes-cri-timestamp-record": Shape(_kubernetes_cri, True),
    "timestamp-then-nested-error-record": Shape(_timestamp_then_record, True),
    "docker-json-file-lines": Shape(_docker_json_file, True),
    "long-json-record": Shape(_long_json_record, True),
    "long-line-ending-in-the-error": Shape(_long_line_ending_in_the_error, False),
    "flattened-traceback-on-one-line": Shape(_flattened_traceback, False),
}
# The frames of TRACEBACK, as a plain log of it is read.
FRAMES = [
    "/opt/venv/lib/python3.12/site-packages/sglang/launch_server.py:14 in main",
    "/opt/venv/lib/python3.12/site-packages/flashinfer/jit/core.py:88 in check",
]


@pytest.mark.parametrize("name", list(SHAPES))
def test_log_shape_class(name: str, tmp_path: Path) -> None:
    shape = SHAPES[name]
    lines = shape.lines()
    log = tmp_path / "server.log"
    log.write_text("\n".join(lines) + "\nINFO shutting down\n")
    doc, result = explain(log)
    assert result.returncode == 1, (doc["status"], result.stderr[-500:])
    assert doc["status"] == "diagnosed" and doc["signature"] == SIGNATURE
    assert doc["input"]["lines"] == len(lines) + 1  # a record is one line of the file
    assert doc["matches"][0]["line"] == shape.line
    assert doc["matches"][0]["in_traceback"] is shape.traceback
    if shape.traceback:
        assert doc["recognised"]["frames"] == FRAMES
        assert doc["recognised"]["error"] == ERROR


# ------------------------------------------------------------------ a GPU named by a path
# Each log names a GPU in a path (never the GPU) and states the real one in prose.
PATHS = {
    "frame-unix-path": f'  File "/srv/t4/main.py", line 10, in <module>\n    run()\n{ERROR}',
    "frame-function-name": f'  File "/srv/app/kernels.py", line 10, in t4\n    run()\n{ERROR}',
    "windows-path": f"Loading C:\\models\\a100-ckpt\\model.bin\n{ERROR}",
    "url": f"see https://example.org/h100/issues/12 for the workaround\n{ERROR}",
    "relative-path": f"srv/t4/main.py:10: {ERROR}",
    "home-path": f"reading ~/runs/rtx-4090/config.yaml failed: {ERROR}",
    "quoted-path-in-message": f'{ERROR} (cache at "/var/cache/tesla-v100/jit")',
}
STATED = "GPU 0: NVIDIA GeForce RTX 3090 (UUID: GPU-1)"


@pytest.mark.parametrize("name", list(PATHS))
def test_gpu_in_a_path_class(name: str, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(f"{STATED}\nTraceback (most recent call last):\n{PATHS[name]}\n")
    doc, _ = explain(log)
    assert doc["recognised"]["gpus"] == ["NVIDIA GeForce RTX 3090"]
    said = [s["text"] for s in doc["steps"] if s["text"].startswith("The log states GPU")]
    assert all("3090" in s and "T4" not in s for s in said), said


# ------------------------------------------------------------------ one line of 2 GiB
# Explains a log in a fresh interpreter and says how far its peak RSS grew while doing so
# (VmHWM reset after the imports, as the archives' bombs are measured).
RUNNER = textwrap.dedent(
    """
    import contextlib, io, json, sys
    from archgap.cli import main
    def status(key):
        with open("/proc/self/status") as lines:
            return int(next(l.split()[1] for l in lines if l.startswith(key)))
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    base = status("VmRSS:")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["explain", sys.argv[1], "--log-only"])
    print(json.dumps({"code": code, "text": out.getvalue(),
                      "peak_mib": (status("VmHWM:") - base) / 1024}))
    """
)


@dataclass(frozen=True)
class Huge:
    before: bytes  # lines before the huge one
    after: bytes  # written right after its 2 GiB: its end, then any lines after it
    lines: int
    error_line: int
    unread: str  # the lines the note names as not read (wholly or in part)


HUGE = {
    "2gib-single-line-ending-in-the-error": Huge(b"", f" {ERROR}".encode(), 1, 1, "lines 1-1 of 1"),
    "2gib-line-ending-in-the-error-between-lines": Huge(
        b"INFO starting\n", f" {ERROR}\nINFO done\n".encode(), 3, 2, "lines 2-2 of 3"
    ),
}


@pytest.mark.parametrize("name", list(HUGE))
def test_huge_line_class(name: str, tmp_path: Path) -> None:
    case = HUGE[name]
    log = tmp_path / "one-line.log"
    with log.open("wb") as handle:  # sparse: the 2 GiB of NUL bytes are never written
        handle.write(case.before)
        handle.seek(len(case.before) + 2 * GIB)
        handle.write(case.after)
    result = subprocess.run(
        [sys.executable, "-c", RUNNER, str(log)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    outcome = json.loads(result.stdout.splitlines()[-1])
    text = " ".join(outcome["text"].split())
    assert re.search(rf"\({case.lines} lines?\)", text), text[:300]
    assert case.unread in text, text[-600:]
    assert outcome["code"] == 1 and f"({SIGNATURE})" in text
    assert f"log line {case.error_line}" in text
    assert outcome["peak_mib"] < 200, f"peak RSS grew by {outcome['peak_mib']:.0f} MiB"
