"""``archgap explain``'s exit code says which of four answers it gave, on real logs.

The codes are the documented ones (README "Exit codes", docs/reference/json.md): 0 no error in
the log, 1 an architecture gap explained, 3 an error archgap cannot explain (a gap in a wording
it does not know must not exit 0 like a healthy log), 4 a known error that is not an architecture
gap. Each log is a real report's text from tests/fixtures/explain_corpus (its source is in the
corpus's index.json); the status each must get is the corpus's own expectation, or, for the
unknown one, that no signature knows its wording.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archgap.cli import main

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "explain_corpus"

# status -> (a real log that gets it, the documented exit code)
CASES = {
    # apex#615: torch's cpp_extension "Unknown CUDA arch (3.0) or GPU not supported"
    "diagnosed": ("apex-615-unknown-arch.log", 1),
    # sglang#12496: CUDA out of memory (index.json: negative, not an architecture gap)
    "not-architecture": ("sglang-12496-oom.log", 4),
    # detectron2#460: a traceback ending in "AssertionError: Torch not compiled with CUDA
    # enabled", which no signature knows. Should one learn it, use another log of that status.
    "unknown": ("detectron2-460-torch-not-compiled-cuda.log", 3),
    # sglang#931: an environment listing without any error (index.json: "no error")
    "no-error": ("sglang-931-t4-flashinfer.log", 0),
}


@pytest.mark.parametrize("status", list(CASES))
def test_each_answer_has_its_documented_exit_code(
    status: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name, code = CASES[status]
    log = str(CORPUS / name)
    assert main(["explain", "--log-only", "--json", log]) == code
    assert json.loads(capsys.readouterr().out)["explain"]["status"] == status
    assert main(["explain", "--log-only", log]) == code  # the text output exits the same


def test_the_four_codes_are_distinct_and_keep_0_1_2() -> None:
    codes = [code for _, code in CASES.values()]
    assert len(set(codes)) == len(codes)
    assert CASES["no-error"][1] == 0 and CASES["diagnosed"][1] == 1  # nothing wrong / a gap
    assert 2 not in codes  # usage and probe errors keep 2


def test_usage_error_still_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--log-only", str(CORPUS / "no-such.log")]) == 2
    assert "no-such.log" in capsys.readouterr().err
