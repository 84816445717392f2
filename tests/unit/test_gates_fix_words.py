"""The gate rules' fixes as worded by kb/fixes_gates.json (issue 44 item 4): where a rule picks
between wordings, each choice is its own template, and each is met here by the case that picks it.

The expectations come from NVIDIA's published facts, not from archgap's output:

- CUDA 8.0 targets sm_61 (Pascal) and CUDA 13.0 removed sm_50 to sm_72, so the toolkits that
  build sm_61 are CUDA 8.0 to 12.9; CUDA 12.8 added sm_120 and no release has dropped it; no
  toolkit targets a compute capability 13.0 (toolkit release notes);
- the driver API's 11000 is CUDA 11.0 (cudaDriverGetVersion: 1000 * major + 10 * minor);
- PTX ISA 8.7 is the one that introduced sm_120, and CUDA 12.8 is the release that writes it
  (PTX ISA release notes);
- FlashAttention's setup.py (2.8.3, line 175) refuses an nvcc older than CUDA 11.7.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import archgap.analysis.explain.gates as gates_module
from tests.unit.test_gates import GATES, _explained, _printed, _with_gpu
from tests.unit.test_kb_pretend_release import _amend, _clear_caches


def test_no_gate_rule_words_a_fix_in_code() -> None:
    # Every fix of the gate rules comes from a template (worded); none is built from a literal.
    path = Path(gates_module.__file__)
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        called = isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Fix"
        assert not called, f"{path.name}:{getattr(node, 'lineno', '?')} builds a Fix"


def _fix_texts(text: str) -> list[str]:
    return [f.text for f in _explained(text).fixes]


def _built_for(cc: str, listed: str) -> list[str]:
    # "The installed package was compiled for {list}, but your current GPU is {cc_int}"
    return _fix_texts(_printed(GATES["any-compiled-for-current-gpu"], cc, listed=listed))


@pytest.mark.parametrize(
    ("cc", "span"),
    [
        ("6.1", "CUDA 8.0 to 12.9"),  # a first and a last toolkit
        ("12.0", "CUDA 12.8 or newer"),  # a first toolkit, none has dropped it
        ("13.0", "a CUDA toolkit that targets it"),  # no toolkit targets it yet
    ],
)
def test_a_build_from_source_names_the_toolkits_that_target_the_gpu(cc: str, span: str) -> None:
    target = "sm_" + cc.replace(".", "")
    assert _built_for(cc, "sm_70 sm_80" if cc == "6.1" else "sm_80 sm_90") == [
        f"install a build of the package that lists {target} (its release notes or index name "
        "the architectures of each wheel)",
        f"or build it from source for {target}, with {span}",
    ]


def test_a_driver_floor_is_named_only_where_the_build_cuda_is_known() -> None:
    gate = GATES["torch-driver-too-old"]
    # CUDA 12.8's GA release needs a Linux driver >= 570.26 (release notes, Table 3)
    known = f"CUDA used to build PyTorch: 12.8\n{_printed(gate, '0.0', found='11000')}"
    older_build = "or install a build of PyTorch made with CUDA 11.0 or older (keeps the driver)"
    assert _fix_texts(known) == [
        "upgrade the NVIDIA driver to 570.26 or newer (CUDA 12.8's minimum on Linux)",
        older_build,
    ]
    assert _fix_texts(_printed(gate, "0.0", found="11000")) == [
        "upgrade the NVIDIA driver to one whose CUDA version is at least the build's",
        older_build,
    ]


def test_a_newer_toolkit_is_bounded_by_the_last_that_builds_the_gpu() -> None:
    message = _printed(GATES["flash-attn-setup-cuda"], "6.1", need="11.7")
    wheel = "or install a prebuilt wheel of FlashAttention for your torch and CUDA (no nvcc needed)"
    assert _fix_texts(_with_gpu(message, "6.1")) == [
        "install CUDA 11.7 or newer, and no newer than CUDA 12.9, the last that builds sm_61; "
        "point CUDA_HOME at it so that nvcc -V reports it",
        wheel,
    ]
    assert _fix_texts(message) == [  # the log names no GPU: no upper bound
        "install CUDA 11.7 or newer; point CUDA_HOME at it so that nvcc -V reports it",
        wheel,
    ]


def test_the_assembler_is_named_by_the_release_that_writes_the_isa() -> None:
    gate = GATES["llvm-nvptx-ptx-version-for-target"]
    assembler = "whatever assembles it (ptxas, or the driver's JIT) must know PTX ISA"
    sm120 = _fix_texts(_printed(gate, "12.0", need="8.7", found="7.8"))
    assert sm120[-1] == f"{assembler} 8.7: CUDA 12.8 or newer"
    # an ISA no toolkit of kb/toolkits.json writes: no release to name
    assert _fix_texts(_printed(gate, "13.0", need="9.9", found="7.8"))[-1] == f"{assembler} 9.9"


def test_a_gate_fix_is_reworded_by_data_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    def reword(data: dict[str, dict[str, dict[str, str]]]) -> None:
        data["fixes"]["gate-built-for-from-source-between"]["text"] = (
            "compile {target} yourself with a toolkit from CUDA {first_cuda} through {last_cuda}"
        )

    _amend(monkeypatch, {"fixes_gates.json": reword})
    try:
        reworded = _built_for("6.1", "sm_70 sm_80")[-1]
    finally:  # the cached templates go back to the kb's own, for the tests after this one
        monkeypatch.undo()
        _clear_caches()
    assert reworded == "compile sm_61 yourself with a toolkit from CUDA 8.0 through 12.9"
    assert _built_for("6.1", "sm_70 sm_80")[-1] == (
        "or build it from source for sm_61, with CUDA 8.0 to 12.9"
    )
