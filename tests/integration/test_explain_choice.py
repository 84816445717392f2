"""What `explain` examines when no --python is given (issue 43, item 3), end to end.

The rule: the environment the log's traceback names, where it exists here, is a real environment
(pyvenv.cfg or conda-meta in its prefix) and nobody but the caller or root can have put it there;
else the active VIRTUAL_ENV / CONDA_PREFIX unless it is archgap's own (sys.prefix); else the log
alone; the first line says which and why. A log that names only the major ("SM 12.x") gets the
fixes every GPU of that major shares as fixes and the others as one case per GPU.

The environments are the real flashinfer-python 0.6.8 venv of the test data (copied where a test
places it) and the seed incident log with its frames pointed at them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema

from archgap.report.jsondoc import schema
from tests.helpers import FIXTURES
from tests.toolkit_stubs import incident_copy, venv_python

INCIDENT_LOG = FIXTURES / "explain_corpus" / "sglang-incident-flashinfer-0.6.8.log"
LOG_SITE = "/root/venv_sglang/lib/python3.12/site-packages"  # what the seed log's frames name
LOG_NAMES = "the environment the log's traceback names"
SM75 = "RuntimeError: FlashInfer requires GPUs with sm75 or higher"


def _explain(*args: str, **env: str) -> tuple[int, dict[str, Any], str]:
    """`archgap explain ARGS --json` and the same in text, in a shell with no active
    environment, no CUDA/FlashInfer variables and ``env`` added."""
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "CONDA_PREFIX") and not k.startswith(("CUDA_", "FLASHINFER_"))
    }
    runs = []
    for extra in (["--json"], []):
        runs.append(
            subprocess.run(
                [sys.executable, "-m", "archgap", "explain", *args, *extra],
                capture_output=True,
                text=True,
                env={**base, "COLUMNS": "400", **env},
                timeout=120,
                check=False,
            )
        )
    doc = json.loads(runs[0].stdout)
    jsonschema.validate(doc, schema("explain"))
    assert runs[1].returncode == runs[0].returncode, runs[1].stderr
    return runs[0].returncode, doc["explain"], runs[1].stdout


def _log_naming(tmp_path: Path, site: str) -> Path:
    """The seed incident log with its frames in ``site`` (a site-packages directory)."""
    log = tmp_path / "crash.log"
    log.write_text(INCIDENT_LOG.read_text().replace(LOG_SITE, site))
    return log


def _first_line(text: str) -> str:
    return text.splitlines()[0]


def test_the_environment_the_log_names_is_examined(tmp_path: Path) -> None:
    root = incident_copy(tmp_path)
    venv = root / "venv"
    log = _log_naming(tmp_path, f"{venv}/lib/python3.11/site-packages")
    code, d, text = _explain(str(log), "--gpu", "sm_120", CUDA_HOME=str(root / "cuda-12.8"))
    python = f"{venv}/bin/python3.11"  # bin/python<X.Y> of the frames' lib/python<X.Y>
    assert d["environment"].startswith(python + " (Python "), d["environment"]
    assert d["environment_reason"] == LOG_NAMES
    assert re.search(rf"examined: {re.escape(python)} \(Python [\d.]+; {LOG_NAMES}\)$", text, re.M)
    # the environment that crashed, read: the chain is confirmed on it (nvcc 12.8 < 12.9)
    assert code == 1 and d["confirmed"] is True
    assert not any("is not the one examined" in n for n in d["notes"])


def test_a_venv_the_log_names_that_is_not_here_leaves_the_log_alone(tmp_path: Path) -> None:
    gone = tmp_path / "venv_sglang211"  # never created
    log = _log_naming(tmp_path, f"{gone}/lib/python3.12/site-packages")
    code, d, text = _explain(str(log))
    assert code == 1 and d["status"] == "diagnosed"
    assert d["environment"] == "" and d["confirmed"] is False
    assert d["environment_reason"] == f"the log's environment {gone} is not on this machine"
    assert _first_line(text).endswith(
        f"examined: no environment (log only; the log's environment {gone} is not on this machine)"
    )


def test_the_active_environment_is_examined(tmp_path: Path) -> None:
    venv = venv_python("venv-flashinfer-python-0.6.8").parent.parent
    incident_copy(tmp_path)  # skips where the test data is missing
    _, d, text = _explain("--message", SM75, VIRTUAL_ENV=str(venv))
    assert d["environment"].startswith(f"{venv}/bin/python"), d["environment"]
    assert d["environment_reason"] == f"the active environment, VIRTUAL_ENV={venv}"
    assert f"; the active environment, VIRTUAL_ENV={venv})" in _first_line(text)


def test_the_log_s_environment_comes_before_the_active_one(tmp_path: Path) -> None:
    root = incident_copy(tmp_path)
    other = venv_python("venv-flashinfer-python-0.6.8").parent.parent
    log = _log_naming(tmp_path, f"{root}/venv/lib/python3.11/site-packages")
    _, d, _ = _explain(str(log), VIRTUAL_ENV=str(other))
    assert d["environment"].startswith(f"{root}/venv/bin/python3.11 ")
    assert d["environment_reason"] == LOG_NAMES


def test_never_archgap_s_own_interpreter(tmp_path: Path) -> None:
    """No --python, a log that names no environment, and the active environment is archgap's
    own (sys.prefix of the process that runs it): the log alone, said so; archgap's interpreter
    is not examined (before, the CLI examined python3 on PATH, the API this interpreter)."""
    own = os.path.realpath(sys.prefix)
    _, d, text = _explain("--message", SM75, VIRTUAL_ENV=own)
    assert d["environment"] == "" and sys.executable not in text
    assert d["environment_reason"] == "VIRTUAL_ENV is archgap's own environment"
    assert "examined: no environment (log only; VIRTUAL_ENV is archgap's own environment)" in text
    _, d, _ = _explain("--message", SM75)
    assert d["environment"] == ""
    assert d["environment_reason"] == (
        "no --python, the log names no environment and none is active"
    )


def test_an_examined_environment_that_is_not_the_log_s_is_said_so(tmp_path: Path) -> None:
    root = incident_copy(tmp_path)
    python = venv_python("venv-flashinfer-python-0.6.8")
    log = _log_naming(tmp_path, f"{root}/venv/lib/python3.11/site-packages")
    _, d, text = _explain(str(log), "--python", str(python))
    assert d["environment_reason"] == ""  # the caller chose it: nothing to explain
    note = f"the log's interpreter ({root}/venv, python3.11) is not the one examined"
    assert any(n.startswith(note) for n in d["notes"]), d["notes"]
    assert note in text
    # the seed log's own environment (not on this machine) is named the same way
    _, d, _ = _explain(str(INCIDENT_LOG), "--python", str(python))
    assert any(
        n.startswith("the log's interpreter (/root/venv_sglang, python3.12) is not the one")
        for n in d["notes"]
    )


def _planted(tmp_path: Path, *, cfg_mode: int) -> tuple[Path, Path]:
    """An environment a log names whose interpreter, if ever run, leaves a marker (and fails)."""
    prefix = tmp_path / "planted"
    (prefix / "lib" / "python3.12" / "site-packages").mkdir(parents=True)
    (prefix / "bin").mkdir()
    marker = tmp_path / "ran"
    python = prefix / "bin" / "python3.12"
    python.write_text(f"#!/bin/sh\ntouch '{marker}'\nexit 1\n")
    python.chmod(0o755)
    cfg = prefix / "pyvenv.cfg"
    cfg.write_text("home = /usr/bin\n")
    cfg.chmod(cfg_mode)
    return _log_naming(tmp_path, f"{prefix}/lib/python3.12/site-packages"), marker


def test_an_environment_others_could_have_planted_is_not_run(tmp_path: Path) -> None:
    """The log is data: an interpreter it names whose pyvenv.cfg (the stdlib the interpreter
    loads) anyone may rewrite is not run; the log alone, said why. The same environment that
    only its owner may change is run (the marker appears), so the check is what stops it."""
    log, marker = _planted(tmp_path, cfg_mode=0o666)
    code, d, _ = _explain(str(log))
    assert not marker.exists()
    assert d["environment"] == "" and code == 1
    assert "is not run:" in d["environment_reason"]
    assert "pyvenv.cfg is writable by others (mode 666)" in d["environment_reason"]
    (tmp_path / "planted" / "pyvenv.cfg").chmod(0o644)
    code, d, _ = _explain(str(log))
    assert marker.exists()  # run: the caller's own environment
    # it could not be examined (not a Python): the log alone, said so, not an error
    assert code == 1 and d["environment"] == ""
    assert "could not be examined" in d["environment_reason"]


def test_a_log_naming_only_the_major_gets_fixes_per_gpu_as_cases() -> None:
    """A log's "SM 12.x requires CUDA >= 12.9" names no GPU: no fix is given as if a 12.1
    (GB10) or a 12.0 were present; what holds on both is a fix, the rest one case per GPU, and
    the GPU's compute capability is what decides."""
    code, d, _ = _explain(str(INCIDENT_LOG), "--log-only")
    assert code == 1
    fixes = [f["text"] for f in d["fixes"]]
    assert fixes and not any(re.search(r"12\.[01]a", t) for t in fixes), fixes
    cases = {c["when"]: c["fixes"] for c in d["cases"]}
    assert [w.split(" (")[0] for w in cases] == ["if the GPU is 12.0", "if the GPU is 12.1"]
    twelve_0, twelve_1 = cases.values()
    assert any('FLASHINFER_CUDA_ARCH_LIST="12.0a"' in f for f in twelve_0)
    assert any('FLASHINFER_CUDA_ARCH_LIST="12.1a"' in f for f in twelve_1)
    assert not any("12.1a" in f for f in twelve_0) and not any("12.0a" in f for f in twelve_1)
    assert any("compute capability (which case's fixes apply)" in x for x in d["decide"])
    # the GPU named: its fixes alone, no case, nothing for the other GPU
    _, d, _ = _explain(str(INCIDENT_LOG), "--log-only", "--gpu", "RTX PRO 6000")
    assert d["cases"] == [] and not any("12.1" in f["text"] for f in d["fixes"])
    assert any('FLASHINFER_CUDA_ARCH_LIST="12.0a"' in f["text"] for f in d["fixes"])
    # no GPU and no major: the generic fixes with the <CC> placeholder
    _, d, _ = _explain("--message", SM75, "--log-only")
    texts = " ".join(f["text"] for f in d["fixes"])
    assert "<CC>" in texts and "12.1a" not in texts.replace("sm_121a", "")
