"""Names and remote messages are data, never terminal control: nothing raw reaches the screen."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.helpers import CUDA_BIN, run_cli

FORGED = "lib\nFORGED.so  sm_70  sass\x1b]0;pwned\x07\x1b[2J.so"


def test_a_file_name_with_newlines_and_escapes_forges_no_row(tmp_path: Path) -> None:
    shutil.copy(CUDA_BIN / "libmix.so", tmp_path / FORGED)
    result = run_cli("kernels", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert not any(line.startswith("FORGED") for line in result.stdout.split("\n"))
    assert "lib\\x0aFORGED.so  sm_70  sass\\x1b]0;pwned\\x07\\x1b[2J.so" in result.stdout


def test_escape_sequences_in_a_remote_error_are_made_visible() -> None:
    wrapper = "sh -c 'printf \"\\033]0;pwned\\007\\033[31mboom\\n\" >&2; exit 1'"
    result = run_cli("probe", "--via", wrapper, "--sections", "gpu")
    assert result.returncode == 2
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert "\\x1b]0;pwned\\x07\\x1b[31mboom" in result.stderr
