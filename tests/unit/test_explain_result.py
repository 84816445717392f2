"""``api.explain``'s typed result: what was read of a log (its origin, its lines, the middle not
read of a long one) beside the diagnosis, and the document ``archgap explain --json`` prints
made from it. The log is FlashInfer's own gate message (flashinfer/jit/core.py,
``check_cuda_arch``: "FlashInfer requires GPUs with sm75 or higher"), read alone."""

from __future__ import annotations

import jsonschema

from archgap import api
from archgap.logread import LogInput
from archgap.report import explain as rendering
from archgap.report.jsondoc import schema

GATE = "RuntimeError: FlashInfer requires GPUs with sm75 or higher"


def test_a_message_is_one_line_read_whole() -> None:
    result = api.explain(GATE, where=None, origin="--message")
    assert isinstance(result, api.ExplainResult)
    assert result.diagnosis.signature == "flashinfer-sm75-gate"
    assert result.exit_code == 1  # an architecture gap explained
    assert (result.origin, result.lines, result.truncated_lines) == ("--message", 1, 0)
    assert (result.skipped_bytes, result.skipped_lines, result.note) == (0, 0, "")
    doc = rendering.document(result)
    jsonschema.validate(doc, schema("explain"))
    assert doc["command"] == "explain"
    # nothing was skipped: the document has no "skipped" part
    assert doc["explain"]["input"] == {"origin": "--message", "lines": 1, "truncated_lines": 0}


def test_a_long_log_read_at_its_ends_says_what_was_not_read() -> None:
    # Line 1 read, lines 2-11 in the middle not read (10 lines, 5000 bytes), the gate's message
    # on line 12: the tail's first line is numbered (lines of head) + gap_lines + 1 = 12.
    read = LogInput(
        "INFO starting\n", GATE + "\n", skipped_bytes=5000, skipped_lines=10, first_skipped=2,
        gap_lines=10,
    )  # fmt: skip
    result = api.explain(read, where=None, origin="server.log")
    assert result.lines == 12
    assert (result.skipped_bytes, result.skipped_lines) == (5000, 10)
    assert "lines 2-11 of 12" in result.note and "5,000 bytes" in result.note
    body = rendering.body(result)["explain"]
    assert body["input"]["skipped"] == {"bytes": 5000, "lines": 10}
    assert body["matches"][0]["line"] == 12
    text = "\n".join(rendering.text(result))
    assert text.startswith("[bold]archgap explain[/] server.log (12 lines)")
    assert "lines 2-11 of 12" in text.splitlines()[-1]  # the note comes last
