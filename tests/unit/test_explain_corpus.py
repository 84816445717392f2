"""The real-world corpus: error texts from public issue reports, each with its expected
signature."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archgap.analysis.explain import explain
from archgap.analysis.logparse import parse_log
from archgap.kb.signatures import load_signatures

CORPUS = Path(__file__).parent.parent / "fixtures" / "explain_corpus"
CASES = json.loads((CORPUS / "index.json").read_text())["cases"]


def test_corpus_is_large_enough_and_sourced() -> None:
    assert len(CASES) >= 25
    for case in CASES:
        assert case["source"].startswith("https://github.com/")
        assert (CORPUS / case["file"]).is_file()


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_corpus_case(case: dict[str, str | None]) -> None:
    text = (CORPUS / str(case["file"])).read_text()
    diagnosis = explain(parse_log(text), load_signatures())
    expected = case["expected_signature"]
    if expected is None:
        assert diagnosis.status in ("unknown", "no-error")
        assert diagnosis.signature is None and diagnosis.root_cause == ""
    else:
        assert diagnosis.status == "diagnosed"
        assert diagnosis.signature == expected, [m.signature for m in diagnosis.matches]
        assert diagnosis.root_cause
        assert all(s.status in ("from-log", "knowledge") for s in diagnosis.steps)


def test_the_generic_capability_failure_explains_when_no_deeper_cause_is_logged() -> None:
    # signatures.json: flashinfer-sm75-gate is explained by flashinfer-failed-device-capability
    # when neither SM-specific cause is in the log; two different logged reasons are still that.
    text = (
        "[2026-11-27 09:14:09 TP0] Failed to get device capability: no CUDA driver.\n"
        "[2026-11-27 09:14:09 TP1] Failed to get device capability: device busy.\n"
        "RuntimeError: FlashInfer requires GPUs with sm75 or higher\n"
    )
    diagnosis = explain(parse_log(text), load_signatures())
    assert diagnosis.signature == "flashinfer-sm75-gate"
    assert diagnosis.root_signature == "flashinfer-failed-device-capability"
