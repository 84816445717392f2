"""Under CI=true a skipped test fails the run (tests/conftest.py); locally it stays a skip."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"


def run_inner(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "test_inner.py").write_text(
        "import pytest\n\ndef test_needs_data():\n    pytest.skip('fixture missing')\n"
    )
    env = {"PATH": "/usr/bin:/bin"} | ({"CI": ci} if ci is not None else {})
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_a_skip_fails_under_ci(tmp_path: Path) -> None:
    result = run_inner(tmp_path, "true")
    assert result.returncode == 1, result.stdout
    assert "skipped under CI=true" in result.stdout and "fixture missing" in result.stdout


def test_a_skip_stays_a_skip_locally(tmp_path: Path) -> None:
    result = run_inner(tmp_path, None)
    assert result.returncode == 0, result.stdout
    assert "1 skipped" in result.stdout
