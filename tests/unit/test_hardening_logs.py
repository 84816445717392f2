"""Logs of any size and content: the end is read, regexes stay linear, lines are \\n lines."""

from __future__ import annotations

import json
from pathlib import Path

from archgap.analysis.explain.logparse import parse_log
from tests.helpers import json_output, run_cli
from tests.unit.test_hardening_binaries import within

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "explain_corpus"
# Line 1 is the FlashInfer gate's error (`FlashInfer requires GPUs with sm75 or higher`).
INCIDENT = CORPUS / "flashinfer-3675-sm75-vllm-omni.log"


def test_a_huge_log_is_read_at_its_end_and_says_what_was_skipped(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    filler = 96 << 20  # one 96 MiB line of NUL bytes (sparse: nothing to write)
    with log.open("wb") as handle:
        handle.write(b"INFO starting\n" * 10)
        handle.seek(140 + filler)
        handle.write(b"\n" + INCIDENT.read_bytes())
    result = run_cli("explain", str(log), "--log-only", "--json")
    doc = json_output(result, "explain")["explain"]
    assert doc["status"] == "diagnosed" and doc["signature"] == "flashinfer-sm75-gate"
    # Lines 1-10 INFO, line 11 the long line (not read), the incident from line 12 on.
    assert doc["matches"][0]["line"] == 12
    assert doc["input"]["skipped"]["lines"] == 1
    # The first 8 MiB and at least the last 56 MiB are read (the tail drops 8 MiB pieces).
    assert filler - (72 << 20) <= doc["input"]["skipped"]["bytes"] <= filler + 1  # and its newline
    text = run_cli("explain", str(log), "--log-only")
    assert "its middle" in text.stdout and "lines 11-11" in text.stdout


def test_evidence_patterns_cost_linear_time_on_hostile_lines() -> None:
    # 4 KB lines that repeat the gates of the lazy patterns ("GPU 1: (\\S.{0,60}?)...",
    # "(\\S.{0,60}?) with CUDA capability"): over the whole line they cost ~16 ms per line
    # (2000 lines: 25 s at load 8); in windows around the first gates, about 1 ms.
    line = ("GPU 1: " + "x" * 53 + " with CUDA capability ") * 60
    text = "\n".join([line[:4096]] * 2000)
    log = within(12, lambda: parse_log(text))  # measured: 25 s before, 4.4 s after (load 8)
    assert log.lines == 2000


def test_a_flood_of_carriage_returns_is_one_line() -> None:
    log = within(10, lambda: parse_log("\r" * (10 << 20) + "\nRuntimeError: boom\n"))
    assert log.lines == 2 and log.truncated_lines == 1


def test_only_newlines_end_lines() -> None:
    # \x0b \x0c \x1c-\x1e \x85 \u2028 are line breaks to str.splitlines, not to a log writer.
    log = parse_log("a\x0bb\x0cc\x1cd\x1de\x1ef\x85g\u2028h\u2029i\nRuntimeError: boom\n")
    assert log.lines == 2
    assert [line for line, _ in log.messages] == [2]


def test_the_json_of_a_small_log_has_no_skipped_part() -> None:
    doc = json.loads(run_cli("explain", str(INCIDENT), "--log-only", "--json").stdout)
    assert "skipped" not in doc["explain"]["input"]
