"""`archgap gates --gpu` on the released FlashInfer 0.6.8 files (installed --no-deps by
scripts/testdata, never imported): only the raises and asserts a GPU's compute capability leads
to (issue 43 item 4).

Expectations read off the installed source by hand (the test checks each line it relies on):
- fused_moe/cute_dsl/blockscaled_contiguous_grouped_gemm_finalize_fusion.py:386-387
  ``if major != 10:`` / ``raise ValueError(``: rejects 12.0 and 9.0, whatever else holds.
- decode.py:1936-1938 ``device_arch = major * 10 + minor`` / ``if device_arch != 80:`` / raise:
  rejects 12.0 (120) and 9.0 (90).
- fused_moe/core.py:763 ``device_arch = f"{major * 10 + minor}"``, 768-770 ``if
  use_deepseek_fp8_block_scale:`` / ``if device_arch != "90":`` / raise: 12.0 only when the
  caller asks for FP8 block scaling; never 9.0. Its ``elif not is_cuda_version_at_least("12.8"):``
  (773) / raise (774) is the else of that test: 9.0 with FP8 block scaling below CUDA 12.8.
- compilation_context.py:45-56 ``if major == 9: return`` / ``elif major == 12:`` / ``if
  is_cuda_version_at_least("12.9"):`` ... ``else: raise RuntimeError("SM 12.x requires CUDA >=
  12.9")``: 12.0 when the CUDA version is below 12.9 (the story); never 9.0.
- mamba/ssd_combined.py:288-289 ``if major < 10:`` / raise: 9.0, not 12.0.
- jit/core.py:107-108 ``if not eligible:`` / raise: ``eligible`` is computed from the arch set,
  not from the GPU in that branch, so the compute capability does not decide it: not listed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from archgap import api
from archgap.analysis import source_shown
from tests.helpers import need_data, run_cli
from tests.toolkit_stubs import venv_python

FILES = {
    "finalize": "fused_moe/cute_dsl/blockscaled_contiguous_grouped_gemm_finalize_fusion.py",
    "decode": "decode.py",
    "moe": "fused_moe/core.py",
    "context": "compilation_context.py",
    "mamba": "mamba/ssd_combined.py",
    "jit": "jit/core.py",
}
SOURCE = {
    ("finalize", 386): "if major != 10:",
    ("decode", 1936): "device_arch = major * 10 + minor",
    ("decode", 1937): "if device_arch != 80:",
    ("moe", 763): 'device_arch = f"{major * 10 + minor}"',
    ("moe", 768): "if use_deepseek_fp8_block_scale:",
    ("moe", 769): 'if device_arch != "90":',
    ("moe", 773): 'elif not is_cuda_version_at_least("12.8"):',
    ("context", 45): "if major == 9:",
    ("context", 47): "elif major == 12:",
    ("context", 50): 'if is_cuda_version_at_least("12.9"):',
    ("context", 56): 'raise RuntimeError("SM 12.x requires CUDA >= 12.9")',
    ("mamba", 288): "if major < 10:",
    ("jit", 107): "if not eligible:",
}


@pytest.fixture(scope="module")
def package() -> Path:
    need_data("venv-flashinfer-python-0.6.8")
    python = venv_python("venv-flashinfer-python-0.6.8")
    (site,) = python.parent.parent.glob("lib/python3.*/site-packages")
    root = site / "flashinfer"
    for (key, line), text in SOURCE.items():  # the lines the expectations rest on
        assert root.joinpath(FILES[key]).read_text().splitlines()[line - 1].strip() == text
    return root


def _rejections(package: Path, gpu: str) -> dict[tuple[str, int], tuple[bool, tuple[str, ...]]]:
    paths = [str(package / f) for f in FILES.values()]
    result = api.gates(paths=paths, gpus=[gpu])
    found = {}
    for r in result.rejections:
        key = next(k for k, f in FILES.items() if r.path.endswith("flashinfer/" + f))
        found[(key, r.line)] = (r.certain, r.unless)
    shown = {(f.path, g.line) for t in result.facts.targets for f in t.functions for g in f.gates}
    assert len(shown) == len(found)  # only the gates that reject are kept
    return found


def test_the_gates_that_reject_an_rtx_pro_6000(package: Path) -> None:
    found = _rejections(package, "RTX PRO 6000")
    assert found == {
        ("finalize", 387): (True, ()),
        ("decode", 1938): (True, ()),
        ("moe", 770): (False, ("use_deepseek_fp8_block_scale",)),
        ("context", 56): (False, ('not is_cuda_version_at_least("12.9")',)),
    }


def test_the_gates_that_reject_an_h100(package: Path) -> None:
    found = _rejections(package, "H100")
    assert found == {
        ("finalize", 387): (True, ()),
        ("decode", 1938): (True, ()),
        ("mamba", 289): (True, ()),
        ("moe", 774): (
            False,
            ("use_deepseek_fp8_block_scale", 'not is_cuda_version_at_least("12.8")'),
        ),
    }


def test_the_cli_lists_them_and_without_gpu_nothing_changes(package: Path) -> None:
    path = str(package / FILES["finalize"])
    result = run_cli("gates", "--path", path, "--gpu", "RTX PRO 6000", env={"COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    assert "1 gates that reject RTX PRO 6000 (12.0) in 1 functions" in result.stdout
    assert "rejects RTX PRO 6000 (12.0)" in result.stdout
    plain = run_cli("gates", "--path", path, env={"COLUMNS": "200"})
    assert "reject" not in plain.stdout and "capability-call" in plain.stdout
    both = run_cli("gates", "--path", path, "--gpu", "H100", "--kind", "raise")
    assert both.returncode == 2 and "--kind" in both.stderr


def test_without_gpu_every_gate_is_kept(package: Path) -> None:
    path = str(package / FILES["mamba"])
    result = api.gates(paths=[path])
    assert result.gpus == () and result.rejections == ()
    kinds = {g.kind for t in result.facts.targets for f in t.functions for g in f.gates}
    assert {"raise", "capability-call"} <= kinds
    assert source_shown.REJECTING == ("raise", "assert")
