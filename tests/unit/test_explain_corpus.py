"""The real-world corpus: error texts from public issue reports, each with its expected
signature."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from archgap.analysis.explain.diagnosis import explain
from archgap.analysis.explain.logparse import parse_log
from archgap.kb.signatures import load_signatures

CORPUS = Path(__file__).parent.parent / "fixtures" / "explain_corpus"
CASES = json.loads((CORPUS / "index.json").read_text())["cases"]


def test_corpus_is_large_enough_and_sourced() -> None:
    positives = [c for c in CASES if c["expected_signature"] is not None]
    negatives = [c for c in CASES if c.get("negative")]
    assert len(positives) >= 100 and len(negatives) >= 20
    assert len({c["source"] for c in CASES}) == len(CASES)  # one report, one case
    for case in CASES:
        assert case["source"].startswith("https://github.com/")
        assert case["expected_cause"] and case["expected_fix"]
        assert (CORPUS / case["file"]).is_file()


def test_every_signature_meets_a_real_report() -> None:
    # Each architecture signature is exercised by at least one real report; each non-architecture
    # one by a negative case (secondary signatures only ever explain another's error).
    named = {c["expected_signature"] for c in CASES}
    for case in (c for c in CASES if c.get("negative")):
        named.add(
            explain(parse_log((CORPUS / case["file"]).read_text()), load_signatures()).signature
        )
    # (the capability gates of kb/gates.json are each met by their framework's own message,
    # printed from its released source: tests/unit/test_gates.py)
    unmet = {s.id for s in load_signatures() if s.id not in named and not s.id.startswith("gate:")}
    assert unmet == {"flashinfer-failed-device-capability", "flashinfer-sm120-needs-cuda128"}


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_corpus_case(case: dict[str, Any]) -> None:
    text = (CORPUS / str(case["file"])).read_text()
    diagnosis = explain(parse_log(text), load_signatures())
    expected = case["expected_signature"]
    if expected is None:
        # No architecture cause is ever invented; a real non-architecture error is named as such.
        assert diagnosis.root_cause == "" and diagnosis.fixes == ()
        if case.get("negative"):
            assert diagnosis.status == "not-architecture", [m.signature for m in diagnosis.matches]
        else:
            assert diagnosis.status in ("unknown", "no-error") and diagnosis.signature is None
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
