"""Under CI=true a skipped test fails the run (tests/conftest.py); locally it stays a skip."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"
# A test that skips itself, one skipped by a marker (the condition is evaluated at setup), and a
# module that skips at import (reported at collection).
TEST_SKIP = "import pytest\n\ndef test_needs_data():\n    pytest.skip('fixture missing')\n"
MARKER_SKIP = (
    "import pytest\n\n@pytest.mark.skipif(True, reason='tool not installed')\n"
    "def test_needs_a_tool():\n    pass\n"
)
MODULE_SKIP = (
    "import pytest\n\nmissing = pytest.importorskip('no_such_module_for_archgap')\n\n"
    "def test_uses_it():\n    pass\n"
)


def run_inner(tmp_path: Path, body: str, ci: str | None) -> subprocess.CompletedProcess[str]:
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "test_inner.py").write_text(body)
    env = {"PATH": "/usr/bin:/bin"} | ({"CI": ci} if ci is not None else {})
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (TEST_SKIP, "fixture missing"),
        (MARKER_SKIP, "tool not installed"),
        (MODULE_SKIP, "no_such_module"),
    ],
)
def test_a_skip_fails_under_ci(tmp_path: Path, body: str, reason: str) -> None:
    result = run_inner(tmp_path, body, "true")
    assert result.returncode != 0, result.stdout
    assert "skipped under CI=true" in result.stdout and reason in result.stdout


@pytest.mark.parametrize("body", [TEST_SKIP, MARKER_SKIP, MODULE_SKIP])
def test_a_skip_stays_a_skip_locally(tmp_path: Path, body: str) -> None:
    result = run_inner(tmp_path, body, None)
    assert result.returncode in (0, 5), result.stdout  # 5: a skipped module leaves no test
    assert "1 skipped" in result.stdout
