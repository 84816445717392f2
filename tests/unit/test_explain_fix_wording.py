"""The wording of explain's fixes (kb/fixes_explain.json): a fix names a CUDA bound only where
a release sets one, and a template reworded in the data is what the rule then says.

Expectations from NVIDIA's tables (kb/toolkits.json holds them with their sources): CUDA 13.0
dropped sm_50-sm_72, so sm_61 is last built by CUDA 12.9; no release has dropped sm_75 or
sm_120 (CUDA 12.8 added sm_120), so an older torch that ships them is not bounded by any CUDA.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from archgap.analysis.explain.diagnosis import explain
from archgap.analysis.explain.logparse import parse_log
from archgap.analysis.explain.rules.facts import CONDITIONAL, DETERMINED, LogFacts
from archgap.analysis.explain.rules.torch_archs import torch_archs
from archgap.kb.signatures import load_signatures
from tests.unit.test_kb_pretend_release import _amend, _clear_caches

BLIND = Path(__file__).resolve().parents[1] / "fixtures" / "explain_blind"


def _facts(cc: str, **stated: str) -> LogFacts:
    said: dict[str, tuple[str, ...]] = {k: (v,) for k, v in stated.items()}
    return LogFacts("", None, (cc,), "", False, None, said, (), None)


def test_an_rtx_5090_report_offers_no_cuda_bound_for_a_torch_that_dropped_it() -> None:
    # HybridRobotics/berkeley-humanoid-lite#49: an RTX 5090 (12.0) with torch 2.5.1; the log
    # prints neither torch's arch list nor its CUDA, so torch either predates sm_120 or left it
    # out. No CUDA release dropped sm_120: the second case's fix can name no "CUDA <=".
    log = (BLIND / "berkeley-humanoid-lite-49-5090-torch251-cu121.log").read_text()
    diagnosis = explain(parse_log(log), load_signatures())
    assert diagnosis.cause_status == CONDITIONAL
    texts = [fix for case in diagnosis.cases for fix in case.fixes]  # each case's fix texts
    assert texts and not any("None" in t for t in texts), texts
    dropped = [t for t in texts if t.startswith("an older torch")]
    assert len(dropped) == 1 and "CUDA <=" not in dropped[0]
    assert "sm_120" in dropped[0] and 'TORCH_CUDA_ARCH_LIST="12.0"' in dropped[0]


def test_a_gpu_older_than_torchs_list_is_bounded_by_the_cuda_that_dropped_it() -> None:
    # sm_61: CUDA 13.0 dropped it, so the last CUDA that builds it is 12.9
    ruling = torch_archs(_facts("6.1", torch_archs="sm_75 sm_80 sm_86 sm_90"))
    assert ruling is not None and ruling.status == DETERMINED
    (fix,) = ruling.fixes
    assert "CUDA <= 12.9" in fix.action and "sm_61" in fix.action


def test_a_gpu_older_than_torchs_list_that_no_cuda_dropped_has_no_bound() -> None:
    # sm_75: every CUDA release since 10.0 builds it; torch's own list left it out
    ruling = torch_archs(_facts("7.5", torch_archs="sm_80 sm_86 sm_90"))
    assert ruling is not None and ruling.status == DETERMINED
    (fix,) = ruling.fixes
    assert "CUDA <=" not in fix.action and "the last toolkit" not in fix.action
    assert "sm_75" in fix.action and 'TORCH_CUDA_ARCH_LIST="7.5"' in fix.action


def test_a_rule_says_what_its_template_says(monkeypatch: pytest.MonkeyPatch) -> None:
    def reword(data: dict[str, dict[str, dict[str, str]]]) -> None:
        data["fixes"]["torch-archs-older-torch"]["text"] = "pin a torch of CUDA {last} ({target})"

    _amend(monkeypatch, {"fixes_explain.json": reword})
    try:
        ruling = torch_archs(_facts("6.1", torch_archs="sm_75 sm_80"))
    finally:  # the templates' cache holds the amended copy until cleared
        monkeypatch.undo()
        _clear_caches()
    assert ruling is not None
    assert [f.action for f in ruling.fixes] == ["pin a torch of CUDA 12.9 (sm_61)"]
