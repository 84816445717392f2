"""The incident end to end: real flashinfer-python 0.6.8 / 0.6.16 sources (test data, never
imported),
a CUDA_HOME whose nvcc prints a real recorded banner, --gpu sm_120.

Expected line numbers were read off the released files by hand (compilation_context.py of 0.6.8:
set() at 62, FLASHINFER_CUDA_ARCH_LIST writes 70/72, auto-detect write 79, except 80, raise 56;
0.6.16: 89, 97/99, 106, 107, 83; jit/core.py raise 108 / 109)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from archgap import api
from archgap.report import explain as explain_report
from archgap.report.console import plain_text
from archgap.report.jsondoc import schema

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "explain_corpus"
BANNERS = ROOT / "tests" / "fixtures" / "nvcc_banners"
DATA = ROOT / "tests" / ".data"

LINES = {
    "0.6.8": {"raise": 108, "empty": 62, "knob": "70/:72", "auto": 79, "except": 80, "sm12": 56},
    "0.6.16": {"raise": 109, "empty": 89, "knob": "97/:99", "auto": 106, "except": 107, "sm12": 83},
}


def _venv(version: str) -> Path:
    python = DATA / f"venv-flashinfer-python-{version}" / "bin" / "python"
    if not python.exists():
        pytest.skip(f"test data missing: run scripts/testdata ({python})")
    return python


def _toolkit(tmp_path: Path, version: str) -> Path:
    """A CUDA_HOME whose bin/nvcc prints the real recorded banner of that release."""
    home = tmp_path / f"cuda-{version}"
    (home / "bin").mkdir(parents=True)
    banner = (BANNERS / f"nvcc-{version}.txt").read_text()
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\ncat <<'EOF'\n" + banner + "EOF\n")
    nvcc.chmod(0o755)
    return home


def _explain(
    *args: str, cuda_home: Path | None = None, stdin: str | None = None
) -> tuple[int, dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_", "FLASHINFER_"))}
    if cuda_home is not None:
        env["CUDA_HOME"] = str(cuda_home)
    proc = subprocess.run(
        [sys.executable, "-m", "archgap", "explain", *args, "--json"],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    doc = json.loads(proc.stdout)
    jsonschema.validate(doc, schema("explain"))
    return proc.returncode, doc["explain"]


def _text(log: str, origin: str) -> str:
    """The text report of ``log`` read alone, as a pipe gets it (the renderer, in-process)."""
    text = plain_text("\n".join(explain_report.text(api.explain(log, where=None, origin=origin))))
    assert text is not None
    return text


def _locations(diagnosis: dict[str, Any]) -> list[str]:
    return [s["location"] for s in diagnosis["steps"] if s["status"] == "confirmed"]


@pytest.mark.parametrize("version", ["0.6.8", "0.6.16"])
def test_incident_log_chain_confirmed(tmp_path: Path, version: str) -> None:
    python = _venv(version)
    log = CORPUS / f"sglang-incident-flashinfer-{version}.log"
    code, d = _explain(
        str(log), "--python", str(python), "--gpu", "sm_120", cuda_home=_toolkit(tmp_path, "12.8")
    )
    n = LINES[version]
    assert code == 1
    assert d["status"] == "diagnosed" and d["confirmed"] is True
    assert d["signature"] == "flashinfer-sm75-gate"
    assert d["root_signature"] == "flashinfer-sm12-needs-cuda129"
    cc = "flashinfer/compilation_context.py"
    locations = _locations(d)
    assert f"flashinfer/jit/core.py:{n['raise']}" in locations
    assert f"{cc}:{n['empty']}" in locations
    assert f"{cc}:{n['auto']}" in locations
    texts = "\n".join(s["text"] for s in d["steps"])
    assert f"writes at :{n['knob']}) is not taken" in texts
    assert f"raises at :{n['sm12']} and the `except` at :{n['except']} swallows it" in texts
    assert "12.8 < 12.9" in texts
    assert "12.8" in d["root_cause"] and "12.9" in d["root_cause"]
    # The fix engine's ranking (analysis.fixes.engine.ranked), as scan and fix show it: kinds kept
    # together; a toolkit switch ranks first only where a toolkit here builds the target and no
    # installed build (torch: none in this venv) has another CUDA major.
    kinds = [f["kind"] for f in d["fixes"]]
    assert kinds == sorted(kinds, key=kinds.index)
    assert "env" in kinds[:2] and "upgrade" in kinds
    assert any("0.7.1" in f["text"] for f in d["fixes"])


def test_bare_message_gives_the_same_chain(tmp_path: Path) -> None:
    python = _venv("0.6.8")
    code, d = _explain(
        "--message",
        "RuntimeError: FlashInfer requires GPUs with sm75 or higher",
        "--python",
        str(python),
        "--gpu",
        "sm_120",
        cuda_home=_toolkit(tmp_path, "12.8"),
    )
    assert code == 1 and d["confirmed"] is True
    locations = _locations(d)
    assert "flashinfer/jit/core.py:108" in locations
    assert "flashinfer/compilation_context.py:62" in locations
    texts = "\n".join(s["text"] for s in d["steps"])
    assert "writes at :70/:72) is not taken" in texts
    assert "12.8 < 12.9" in texts


def test_log_only_is_useful(tmp_path: Path) -> None:
    log = CORPUS / "sglang-incident-flashinfer-0.6.8.log"
    code, d = _explain(str(log), "--log-only")
    assert code == 1 and d["environment"] == "" and d["confirmed"] is False
    assert d["root_signature"] == "flashinfer-sm12-needs-cuda129"
    assert {s["status"] for s in d["steps"]} <= {"from-log", "knowledge"}
    assert "12.9" in d["root_cause"]
    assert any(f["kind"] == "toolkit" for f in d["fixes"])


def test_environments_differ_when_nvcc_here_is_12_9(tmp_path: Path) -> None:
    python = _venv("0.6.8")
    log = CORPUS / "sglang-incident-flashinfer-0.6.8.log"
    code, d = _explain(
        str(log), "--python", str(python), "--gpu", "sm_120", cuda_home=_toolkit(tmp_path, "12.9")
    )
    assert code == 1 and d["confirmed"] is False
    assert any(s["status"] == "unconfirmed" for s in d["steps"])
    assert any("environment differs" in note for note in d["notes"])
    assert "service" in d["root_cause"]


def test_unknown_error_is_said_unknown() -> None:
    # An error line no signature knows is "unknown" (exit 3: a gap may be missed, so not the 0
    # of a healthy log); text without any error is "no-error" (exit 0).
    code, d = _explain("--message", "KeyError: 'model.layers.0.weight'", "--log-only")
    assert code == 3 and d["status"] == "unknown" and d["root_cause"] == ""
    code, d = _explain("--message", "served 10 requests in 2.1 s", "--log-only")
    assert code == 0 and d["status"] == "no-error"


def test_stdin_and_usage_errors() -> None:
    code, d = _explain(
        "-",
        "--log-only",
        stdin="ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'\n",
    )
    assert code == 1 and d["signature"] == "ptxas-unknown-gpu-name"
    proc = subprocess.run(
        [sys.executable, "-m", "archgap", "explain"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2 and "LOGFILE" in proc.stderr


def test_json_says_how_the_cause_is_known_and_what_would_decide_it() -> None:
    # The SM 12.x wording exists only in flashinfer 0.6.7-0.7.0: that pins the cause; what is
    # left to decide is which 12.x GPU it is (for the fixes), not the cause.
    log = CORPUS / "sglang-incident-flashinfer-0.6.8.log"
    code, d = _explain(str(log), "--log-only")
    assert code == 1 and d["cause_status"] == "determined"
    assert "compute capability (which case's fixes apply)" in d["decide"][0]
    assert not any("pip show" in item or "nvcc" in item for item in d["decide"])
    # The gate's message alone fits several releases and GPUs: conditional, with what decides it.
    message = "RuntimeError: FlashInfer requires GPUs with sm75 or higher"
    code, d = _explain("--message", message, "--log-only")
    assert code == 1 and d["cause_status"] == "conditional"
    assert any("pip show flashinfer-python" in item for item in d["decide"])


def test_an_error_that_is_not_an_architecture_gap_exits_4_without_a_cause() -> None:
    log = CORPUS / "sglang-12496-oom.log"
    code, d = _explain(str(log), "--log-only")
    assert code == 4 and d["status"] == "not-architecture"
    assert d["signature"] == "cuda-out-of-memory" and d["root_cause"] == "" and d["fixes"] == []
    text = _text(log.read_text(), str(log))
    assert "not an architecture gap" in text and "(3 lines)" in text
    assert "(1 line)" in _text("x", "--message")


def test_text_puts_the_log_only_note_before_the_chain() -> None:
    log = CORPUS / "sglang-incident-flashinfer-0.6.8.log"
    out = _text(log.read_text(), str(log))
    assert out.index("no environment examined") < out.index("\nchain")
    # One count per message: the 16 logged warnings are counted once, in the step that cites them.
    assert out.count("16x") == 1


def test_log_only_gpu_gb10_on_a_log_naming_only_sm_12x() -> None:
    # FlashInfer's swallowed error names only the major ("SM 12.x requires CUDA >= 12.9");
    # --gpu GB10 makes the GPU 12.1, and arch-specific SASS (12.0a) runs on exactly 12.0, so
    # no 12.0a fix may be offered, and the 12.1 ones are filled in
    text = (
        "Failed to get device capability: SM 12.x requires CUDA >= 12.9.\n"
        "RuntimeError: FlashInfer requires GPUs with sm75 or higher\n"
    )
    code, d = _explain("-", "--log-only", "--gpu", "GB10", stdin=text)
    fixes = " | ".join(f["text"] for f in d["fixes"])
    assert code == 1 and d["status"] == "diagnosed"
    assert "12.1a" in fixes and "12.0a" not in fixes and "<CC>" not in fixes
