"""The small things: shell completion (bash run for real, zsh loaded by compinit), settings from
pyproject.toml or the user's config file, -q/-v, and the one-line summary."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import CUDA_BIN, install_fake_distribution, make_venv, run_cli


def complete_bash(script: str, *words: str) -> list[str]:
    """What bash offers for the last word, from the generated script's function."""
    bash = shutil.which("bash")
    assert bash
    quoted = " ".join(f"'{w}'" for w in words)
    program = f"{script}\nCOMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; _archgap\n"
    program += 'printf "%s\\n" "${COMPREPLY[@]}"\n'
    done = subprocess.run(
        [bash, "-c", program], capture_output=True, text=True, timeout=30, check=True
    )
    return done.stdout.split()


def test_bash_completion_knows_commands_options_and_choices() -> None:
    script = run_cli("completion", "bash").stdout
    assert complete_bash(script, "archgap", "gp") == ["gpus"]
    assert complete_bash(script, "archgap", "scan", "--for") == ["--format"]
    assert complete_bash(script, "archgap", "scan", "--format", "") == [
        "text", "json", "markdown", "csv", "summary",
    ]  # fmt: skip
    # Each command's own choices: gates has no summary, probe only JSON.
    assert complete_bash(script, "archgap", "gates", "--format", "s") == []
    assert complete_bash(script, "archgap", "probe", "--format", "") == ["json"]
    assert complete_bash(script, "archgap", "scan", "--gpu", "") == []  # a name: nothing to offer


def test_zsh_completion_loads_under_compinit() -> None:
    zsh = shutil.which("zsh")
    assert zsh, "zsh is missing: scripts/services installs it (apt-get install zsh)"
    script = run_cli("completion", "zsh").stdout
    assert subprocess.run([zsh, "-n", "-c", script], timeout=30, check=False).returncode == 0
    program = f"autoload -U compinit; compinit -u -D\n{script}\nprint -r -- $_comps[archgap]"
    done = subprocess.run([zsh, "-f", "-c", program], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "_archgap", done.stderr


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("smallvenv") / "venv"
    files = {"fakekernels/libmix.so": CUDA_BIN / "libmix.so"}
    install_fake_distribution(make_venv(root), "fakekernels", "1.2.3", files)
    return root / "bin" / "python"


def scan_in(
    directory: Path, venv: Path, *more: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "archgap", "scan", "--python", str(venv), *more],
        capture_output=True, text=True, cwd=directory, timeout=120, check=False,
        env={**os.environ, "XDG_CONFIG_HOME": str(directory / "no-config"), **(env or {})},
    )  # fmt: skip


def test_pyproject_settings_make_the_gate_one_word(venv: Path, tmp_path: Path) -> None:
    # libmix.so: SASS sm_75 ... sm_120 but nothing that runs on a V100 (7.0): a gap, exit 1.
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[tool.archgap]\nrequire = ["V100"]\n')
    result = scan_in(project / "src", venv, "--format", "summary", "-v")
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith("archgap scan: 1 gap(s)") and "V100 7.0" in result.stdout
    assert f"archgap: settings from {project / 'pyproject.toml'}" in result.stderr
    # The command line wins; --no-config ignores the file.
    assert scan_in(project, venv, "--require", "12.0", "--format", "summary").returncode == 0
    assert scan_in(project, venv, "--no-config", "--gpu", "12.0").returncode == 0
    (project / "pyproject.toml").write_text('[tool.archgap]\nrequir = ["V100"]\n')
    typo = scan_in(project, venv)
    assert typo.returncode == 2 and "unknown archgap setting(s) requir" in typo.stderr


def test_user_config_file(venv: Path, tmp_path: Path) -> None:
    config = tmp_path / "xdg" / "archgap"
    config.mkdir(parents=True)
    (config / "config.toml").write_text('gpus = ["V100", "12.0"]\n')
    result = scan_in(
        tmp_path, venv, "--format", "summary", env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    )
    assert (
        "2 packages x" not in result.stdout
        and "1 packages x 2 GPUs (V100 7.0, 12.0)" in result.stdout
    )


def test_quiet_hides_warnings_verbose_says_steps(venv: Path, tmp_path: Path) -> None:
    # No nvidia-smi under an empty PATH: a warning line ("! nvidia-smi: ...") normally.
    env = {"PATH": str(tmp_path)}
    loud = scan_in(tmp_path, venv, "--gpu", "12.0", env=env)
    assert "! nvidia-smi" in loud.stdout
    quiet = scan_in(tmp_path, venv, "--gpu", "12.0", "-q", env=env)
    assert "! " not in quiet.stdout and "fakekernels" in quiet.stdout and quiet.stderr == ""
    verbose = scan_in(tmp_path, venv, "--gpu", "12.0", "-v", env=env)
    assert f"archgap: inspecting {venv} (--python)" in verbose.stderr
