"""The installed code's chain where the incident's own run does not go: an nvcc whose version
cannot be known, a swallowed raise that neither the log shows nor this environment meets, and an
installed release that differs from the one that crashed.

Real flashinfer-python 0.6.8 sources (test data, never imported). Line numbers were read off the
released files by hand: compilation_context.py of 0.6.8 has `elif major == 12:` at 47,
`if is_cuda_version_at_least("12.9"):` at 50, `raise RuntimeError("SM 12.x requires CUDA >=
12.9")` at 56, the auto-detect write `self.TARGET_CUDA_ARCHS.add(...)` at 79 inside a `try`
whose `except Exception` at 80 only logs; jit/core.py raises "FlashInfer requires GPUs with sm75
or higher" at 108 in 0.6.8 and at 109 in 0.6.16 (the incident log's frame). FlashInfer's nvcc
lookup takes CUDA_HOME first (kb/jit.json's nvcc_lookup, from flashinfer/jit/cpp_ext.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "explain_corpus"
PYTHON = ROOT / "tests" / ".data" / "venv-flashinfer-python-0.6.8" / "bin" / "python"
GATE = "RuntimeError: FlashInfer requires GPUs with sm75 or higher"


def _explain(cuda_home: Path, *args: str) -> dict[str, Any]:
    """``archgap explain ... --python <0.6.8> --json`` with CUDA_HOME set to ``cuda_home``."""
    if not PYTHON.exists():
        pytest.skip(f"test data missing: run scripts/testdata ({PYTHON})")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_", "FLASHINFER_"))}
    env["CUDA_HOME"] = str(cuda_home)
    proc = subprocess.run(
        [sys.executable, "-m", "archgap", "explain", *args, "--python", str(PYTHON), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    diagnosis: dict[str, Any] = json.loads(proc.stdout)["explain"]
    return diagnosis


def _step(diagnosis: dict[str, Any], location: str) -> dict[str, Any]:
    """The one step at ``location``."""
    found: list[dict[str, Any]] = [s for s in diagnosis["steps"] if s["location"] == location]
    assert len(found) == 1, [(s["location"], s["text"]) for s in diagnosis["steps"]]
    return found[0]


def test_an_nvcc_of_no_known_version_is_said_and_not_compared(tmp_path: Path) -> None:
    # CUDA_HOME names a directory with no bin/nvcc: the lookup stops there (CUDA_HOME first), so
    # whether `is_cuda_version_at_least("12.9")` holds cannot be read on this environment.
    log = CORPUS / "sglang-incident-flashinfer-0.6.8.log"
    d = _explain(tmp_path, str(log), "--gpu", "sm_120")
    cc = "flashinfer/compilation_context.py"
    assert "`major == 12` holds" in _step(d, f"{cc}:47")["text"]
    version = _step(d, f"{cc}:50")
    assert version["text"].startswith(
        '`is_cuda_version_at_least("12.9")` depends on the CUDA version of the nvcc the package '
        "finds: here "
    )
    assert str(tmp_path / "bin" / "nvcc") in version["text"]
    # no version read, so none compared, and the cause is not confirmed on this environment
    assert not any("The nvcc it resolves is" in s["text"] for s in d["steps"])
    assert d["cause_status"] != "confirmed"


def test_a_swallowed_raise_neither_logged_nor_met_here_is_a_write_that_can_fail(
    tmp_path: Path,
) -> None:
    # The bare message carries no handler warning, and on a 9.0 GPU `major == 12` is false: the
    # raise at :56 is not known to fire, so the write at :79 only can fail, and it can raise.
    d = _explain(tmp_path, "--message", GATE, "--gpu", "sm_90")
    cc = "flashinfer/compilation_context.py"
    write = _step(d, f"{cc}:79")
    assert write["text"].startswith(
        "The write at :79 in the else branch of `FLASHINFER_CUDA_ARCH_LIST` can fail silently: "
        "the `except` at :80 swallows any exception"
    )
    assert write["fact"] == "self.TARGET_CUDA_ARCHS.add(self._normalize_cuda_arch(major, minor))"
    hidden = _step(d, f"{cc}:56")
    assert hidden["text"] == "_normalize_cuda_arch() can raise SM 12.x requires CUDA >= 12.9"
    assert not any("never completes" in s["text"] for s in d["steps"])


def test_an_installed_release_other_than_the_one_that_crashed_is_noted(tmp_path: Path) -> None:
    # The log's last frame is 0.6.16's jit/core.py:109; 0.6.8 raises the same at 108.
    log = CORPUS / "sglang-incident-flashinfer-0.6.16.log"
    d = _explain(tmp_path, str(log), "--gpu", "sm_120")
    assert (
        'flashinfer/jit/core.py:109 here does not read `raise RuntimeError("FlashInfer requires '
        'GPUs with sm75 or higher")` as in the log: the installed flashinfer-python 0.6.8 '
        "differs from the one that crashed"
    ) in d["notes"]
    assert _step(d, "flashinfer/jit/core.py:108")["text"] == "Raised in check_cuda_arch()"
