"""Capability gates in frameworks' own words (kb/gates.json), each met by its own message.

Each gate's message is printed here as its framework prints it (the placeholders of its released
source filled with capabilities chosen for the case), then explained from the log alone. The
expectations come from the rule each case falls under, never from archgap's output:

- a GPU below a framework's minimum runs no build of it (NVIDIA's numbering: SASS for sm_XY runs
  on X.Z with Z >= Y only, and a framework that needs 8.0 has no code for 7.5): the fix is another
  GPU at or above the minimum, another backend, or a release that still served the GPU;
- a GPU below a compiler's lowest target needs an older toolkit: CUDA 13.0 removed sm_50 to sm_72
  (its release notes), so the last toolkit that builds sm_50 or sm_61 is CUDA 12.9;
- a message whose own facts say the GPU meets the minimum is not this gap.
"""

from __future__ import annotations

import pytest

from archgap.analysis.explain.diagnosis import Diagnosis, explain
from archgap.analysis.explain.logparse import parse_log
from archgap.kb.gates import Gate, load_gates, parse_gates
from archgap.kb.signatures import load_signatures

GATES = {g.id: g for g in load_gates()}


def _printed(gate: Gate, cc: str, need: str = "", listed: str = "") -> str:
    """The gate's message as its framework prints it for a GPU of ``cc``."""
    values = {
        "cc": cc,
        "cc_int": cc.replace(".", ""),
        "cc_major": cc.split(".")[0],
        "cc_minor": cc.split(".")[1],
        "need": need,
        "need_int": need.replace(".", ""),
        "list": listed,
    }
    return gate.message.format(**values)


def _explained(text: str) -> Diagnosis:
    return explain(parse_log(text), load_signatures())


def _fixes(d: Diagnosis) -> str:
    return " | ".join(f.text for f in d.fixes)


def test_every_gate_names_its_release_and_source() -> None:
    for gate in load_gates():
        assert gate.source.startswith("https://"), gate.id
        if gate.framework != "any" and gate.line:
            assert gate.release and gate.file, gate.id
    with pytest.raises(ValueError):
        parse_gates({"gates": [{**_entry(), "rule": "guess"}]})


@pytest.mark.parametrize(
    ("gate_id", "cc", "need"),
    [
        ("cudf-volta-required", "6.0", "7.0"),  # a P100 under RAPIDS >= 24.02
        ("any-below-minimum", "7.5", "8.0"),  # koharu on a T4
        ("any-minimum-current", "7.5", "8.0"),  # vLLM's awq_marlin on a T4
        ("any-required-device", "3.0", "3.5"),  # XLA on a GTX 680
    ],
)
def test_a_gpu_below_the_minimum_runs_no_build(gate_id: str, cc: str, need: str) -> None:
    gate = GATES[gate_id]
    diagnosis = _explained(_printed(gate, cc, need))
    assert diagnosis.signature == gate.signature_id
    assert f">= {need}" in diagnosis.root_cause and f"{cc})" in diagnosis.root_cause
    assert "older" in diagnosis.root_cause
    fixes = _fixes(diagnosis)
    assert f"compute capability {need} or newer" in fixes
    assert "TORCH_CUDA_ARCH_LIST" not in fixes and "rebuild" not in fixes  # no build adds it


def test_the_last_release_that_served_the_gpu_is_offered_only_when_it_did() -> None:
    gate = GATES["cudf-volta-required"]
    assert gate.older is not None and gate.older.serves_from == "6.0"  # RAPIDS 23.12: Pascal
    pascal = _fixes(_explained(_printed(gate, "6.1", "7.0")))
    maxwell = _fixes(_explained(_printed(gate, "5.2", "7.0")))
    assert "23.12" in pascal
    assert "23.12" not in maxwell  # RAPIDS never served 5.x


@pytest.mark.parametrize("gate_id", ["any-minimum-current", "any-below-minimum"])
def test_a_gpu_that_meets_the_minimum_is_not_this_gap(gate_id: str) -> None:
    # the message's own numbers say 8.6 >= 8.0: whatever failed, it was not this minimum
    diagnosis = _explained(_printed(GATES[gate_id], "8.6", "8.0"))
    assert ">= 8.0" not in diagnosis.root_cause


def test_a_compiler_below_the_gpu_needs_the_last_toolkit_that_built_it() -> None:
    gate = GATES["numba-cuda-nvrtc-below-minimum"]
    listed = "7.5, 8.0, 8.6, 8.7, 8.9, 9.0, 10.0, 11.0, 12.0"  # NVRTC 13.0: sm_75 and up
    diagnosis = _explained(_printed(gate, "6.1", listed=listed))
    assert diagnosis.signature == gate.signature_id
    assert "lowest target is 7.5" in diagnosis.root_cause and "6.1" in diagnosis.root_cause
    assert "CUDA 12.9 or older" in _fixes(diagnosis)  # CUDA 13.0 removed sm_50..sm_72


def test_nvvm_requires_names_its_minimum() -> None:
    gate = GATES["numba-cuda-cc-requires"]
    diagnosis = _explained(_printed(gate, "5.0", "7.5"))
    assert diagnosis.signature == gate.signature_id
    assert "lowest target is 7.5" in diagnosis.root_cause
    assert "CUDA 12.9 or older" in _fixes(diagnosis)


def test_a_build_without_code_at_or_below_the_gpu() -> None:
    gate = GATES["cudf-missing-ptx"]
    diagnosis = _explained(_printed(gate, "5.2"))
    assert diagnosis.signature == gate.signature_id
    assert "no code for compute capability 5.2 or below" in diagnosis.root_cause
    assert "compute capability 6.0 or newer" in _fixes(diagnosis)


def test_a_minimum_without_the_gpu_asks_for_it() -> None:
    # cuDF's first line alone: 7.0 needed, the GPU not stated (the lines after it are cut)
    text = GATES["cudf-volta-required"].message.split("\n")[0].format(need="7.0")
    diagnosis = _explained(text)
    assert diagnosis.cause_status == "conditional"
    assert any("compute capability" in d for d in diagnosis.decide)


def _entry() -> dict[str, object]:
    return {
        "id": "x",
        "framework": "f",
        "release": "",
        "file": "",
        "line": 0,
        "message": "m",
        "keywords": ["m"],
        "pattern": "m",
        "rule": "minimum",
        "source": "https://example.invalid",
    }
