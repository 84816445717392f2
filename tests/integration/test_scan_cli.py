"""archgap scan end to end on a real venv holding the project's own nvcc-built libraries.

Expected verdicts follow from the nvcc command lines in tests/fixtures/cuda/build.sh:
- libmix.so: SASS sm_75 sm_90 sm_90a sm_100a sm_103f sm_120 sm_120a; PTX compute_75 compute_100f
  compute_120a.
- libcomp_default.so: SASS sm_80 sm_120a; PTX compute_90.
- libptxonly.so: PTX compute_80 only.
"""

import os
import pty
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import CUDA_BIN, install_fake_distribution, json_output, make_venv, run_cli


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scanvenv") / "venv"
    site = make_venv(root)
    install_fake_distribution(
        site,
        "fakekernels",
        "1.2.3",
        {
            "fakekernels/libmix.so": CUDA_BIN / "libmix.so",
            "fakekernels/libcomp_default.so": CUDA_BIN / "libcomp_default.so",
        },
    )
    # A library no RECORD owns (copied in by hand): scanned and shown as such.
    (site / "stray").mkdir()
    (site / "stray" / "libptxonly.so").write_bytes((CUDA_BIN / "libptxonly.so").read_bytes())
    return root / "bin" / "python"


def verdicts(doc: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(p["package"], p["gpu"]): p["verdict"] for p in doc["packages"]}


def test_named_gpus(venv: Path) -> None:
    result = run_cli("scan", "--python", str(venv), "--gpu", "sm_120,T4", "--gpu", "GB10", "--json")
    doc = json_output(result, "scan")
    got = verdicts(doc)
    assert got[("fakekernels", "sm_120")] == "native"  # sm_120 and sm_120a SASS
    assert got[("fakekernels", "T4")] == "partial"  # libcomp_default has sm_80+ only
    # libcomp_default: no SASS runs on 12.1, its compute_90 PTX would be JIT-compiled; GB10 systems
    # are aarch64 (kb/gpus.json) and these x86-64 libraries cannot load there at all: blocked
    assert got[("fakekernels", "GB10")] == "blocked"
    gb10 = next(p for p in doc["packages"] if p["package"] == "fakekernels" and p["gpu"] == "GB10")
    comp = next(lib for lib in gb10["libraries"] if lib["path"].endswith("libcomp_default.so"))
    assert "JIT-compiled" in comp["reason"]
    assert all("x86-64 and GB10 systems are aarch64" in lib["load"] for lib in gb10["libraries"])
    assert got[("(no distribution)", "T4")] == "none"  # compute_80 PTX cannot serve 7.5
    assert got[("(no distribution)", "sm_120")] == "jit"
    partial = next(p for p in doc["packages"] if p["package"] == "fakekernels" and p["gpu"] == "T4")
    assert "libcomp_default.so" in partial["reason"] and "libmix.so" not in partial["reason"]
    libs = {Path(lib["path"]).name: lib for lib in partial["libraries"]}
    assert libs["libmix.so"]["deciding_entry"] == "sm_75 SASS in .nv_fatbin"
    # A package that cannot run on a named GPU is a gap: exit 1.
    assert result.returncode == 1
    assert doc["gap"] is True


def test_no_gap_exit_zero_and_text_output(venv: Path) -> None:
    result = run_cli("scan", "--python", str(venv), "--gpu", "12.0", "--libs")
    assert result.returncode == 0, result.stderr
    assert "fakekernels" in result.stdout and "native" in result.stdout
    assert "libptxonly.so" in result.stdout  # the per-library view
    assert "Traceback" not in result.stderr


def test_default_matrix_never_fails(venv: Path, tmp_path: Path) -> None:
    # No nvidia-smi, no NVML under an empty root, no --gpu: the default matrix, as information.
    empty = str(tmp_path)
    result = run_cli("scan", "--python", str(venv), "--root", empty, "--json", env={"PATH": empty})
    doc = json_output(result, "scan")
    assert {g["role"] for g in doc["gpus"]} == {"matrix"}
    assert result.returncode == 0
    assert any(p["verdict"] == "none" for p in doc["packages"])  # T4 for the stray library


def test_unknown_gpu_and_missing_interpreter_are_usage_errors(venv: Path) -> None:
    result = run_cli("scan", "--python", str(venv), "--gpu", "Voodoo 5")
    assert result.returncode == 2
    assert "unknown GPU" in result.stderr and "Traceback" not in result.stderr
    result = run_cli("scan", "--python", "/nonexistent/bin/python", "--gpu", "12.0")
    assert result.returncode == 2
    assert "cannot run /nonexistent/bin/python" in result.stdout + result.stderr


FOOTER = re.compile(
    r"3 native files read in \d+\.\d\d s, the rest of the probe \d+\.\d\d s, "
    r"analysis \d+\.\d\d s \(\d+\.\d\d s in all\)"
)


def test_progress_on_a_terminal_only_and_the_footer_names_where_the_time_went(venv: Path) -> None:
    piped = run_cli("scan", "--python", str(venv), "--gpu", "12.0")
    assert FOOTER.search(piped.stdout), piped.stdout
    assert "reading native files" not in piped.stderr  # no progress into a pipe
    # stderr on a terminal (a pty): n/N of the three native files of the venv fixture.
    controller, terminal = pty.openpty()
    with subprocess.Popen(
        [sys.executable, "-m", "archgap", "scan", "--python", str(venv), "--gpu", "12.0"],
        stdout=subprocess.PIPE, stderr=terminal, text=True,
    ) as proc:  # fmt: skip
        os.close(terminal)
        shown = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            shown += chunk
        stdout = proc.stdout.read() if proc.stdout else ""
    os.close(controller)
    assert proc.returncode == 0
    assert re.search(rb"reading native files.*3/3", shown), shown[-400:]
    assert FOOTER.search(stdout), stdout
