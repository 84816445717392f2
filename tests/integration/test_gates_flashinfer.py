"""`archgap gates flashinfer-python` on the real 0.6.8 wheel (installed --no-deps by
scripts/testdata, never imported): the api's result through the renderers the CLI prints
(in-process), and the CLI itself for an unknown distribution.

Expected locations were read off the released files by hand: ``def check_cuda_arch():`` is
flashinfer/jit/core.py line 96 with ``if major >= 8:`` at 100 and ``raise RuntimeError("FlashInfer
requires GPUs with sm75 or higher")`` at 108; ``def _normalize_cuda_arch`` is
flashinfer/compilation_context.py line 34 with ``raise RuntimeError("SM 12.x requires CUDA >=
12.9")`` at 56 under ``elif major == 12`` (47); ``torch.cuda.get_device_capability(device)`` is
called at 78 in ``__init__``, which reads FLASHINFER_CUDA_ARCH_LIST at 63.

The whole distribution (600 files) takes tens of seconds on a loaded 2-core machine, so that run
is behind the ``realenv`` marker; the default suite maps the two released files themselves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

from archgap import api
from archgap.report import gates as gates_report
from archgap.report.jsondoc import schema
from tests.helpers import json_output, run_cli
from tests.toolkit_stubs import venv_python


def flashinfer_python() -> Path:
    python = venv_python("venv-flashinfer-python-0.6.8")
    if not python.exists():
        pytest.skip("scripts/testdata has not installed the flashinfer wheels")
    return python


def package_dir(python: Path) -> Path:
    (site,) = python.parent.parent.glob("lib/python*/site-packages")
    return site / "flashinfer"


@pytest.mark.realenv
def test_whole_distribution() -> None:
    python = flashinfer_python()
    result = run_cli("gates", "flashinfer-python", "--python", str(python), "--json", timeout=600)
    assert result.returncode == 0, result.stderr
    (target,) = json_output(result, "gates")["gates"]["targets"]
    assert target["label"] == "flashinfer-python 0.6.8"
    check_incident_functions(target["functions"])


def test_the_two_released_files() -> None:
    python = flashinfer_python()
    package = package_dir(python)
    files = [str(package / "jit" / "core.py"), str(package / "compilation_context.py")]
    doc = gates_report.document(api.gates(python=str(python), paths=files))
    jsonschema.validate(doc, schema("gates"))
    targets = doc["gates"]["targets"]
    check_incident_functions([f for t in targets for f in t["functions"]])


def check_incident_functions(found: list[dict[str, Any]]) -> None:
    functions = {(f["path"].split("site-packages/", 1)[1], f["function"]): f for f in found}
    check = functions[("flashinfer/jit/core.py", "check_cuda_arch")]
    assert check["line"] == 96
    kinds = {(g["line"], g["kind"]) for g in check["gates"]}
    assert {(100, "comparison"), (108, "raise")} <= kinds
    (raise_gate,) = [g for g in check["gates"] if g["kind"] == "raise"]
    assert raise_gate["message"] == "FlashInfer requires GPUs with sm75 or higher"
    assert raise_gate["condition"] == "if not eligible"

    normalize = functions[
        ("flashinfer/compilation_context.py", "CompilationContext._normalize_cuda_arch")
    ]
    assert normalize["line"] == 34
    (sm12,) = [g for g in normalize["gates"] if g["kind"] == "raise"]
    assert (sm12["line"], sm12["message"]) == (56, "SM 12.x requires CUDA >= 12.9")
    assert "major == 12" in sm12["condition"]

    init = functions[("flashinfer/compilation_context.py", "CompilationContext.__init__")]
    gates = {(g["line"], g["kind"], g["detail"]) for g in init["gates"]}
    assert (78, "capability-call", "torch.cuda.get_device_capability") in gates
    assert (63, "arch-env", "FLASHINFER_CUDA_ARCH_LIST") in gates


def test_text_output_and_unknown_distribution() -> None:
    python = venv_python("venv-flashinfer-python-0.6.8")
    if not python.exists():
        pytest.skip("scripts/testdata has not installed the flashinfer wheels")
    jit = str(package_dir(python) / "jit")
    text = "\n".join(gates_report.text(api.gates(python=str(python), paths=[jit])))
    assert "check_cuda_arch" in text
    assert "FlashInfer requires GPUs with sm75 or higher" in text
    unknown = run_cli("gates", "no-such-dist", "--python", str(python))
    assert unknown.returncode == 2
    assert "unknown distribution" in unknown.stderr
