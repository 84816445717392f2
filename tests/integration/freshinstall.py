"""What a newcomer and a release start from: a copy of the checkout's tracked files (no untracked
build output, test data or virtual environment leaks in) and a fresh virtual environment made by
``python -m venv`` (no system site packages), with commands run as in an activated shell."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT

# Environment that would make a fresh venv's Python see something else than what was installed.
_LEAKS = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "CONDA_PREFIX")
INSTALL_TIMEOUT = 900  # pip install from the package index; a hang is a failure, not a wait


def tracked_files() -> list[str]:
    """The checkout's tracked files (``git ls-files``), as they are in the working tree. In an
    unpacked sdist (no .git), the files the sdist was made of: its SOURCES.txt, less what
    setuptools generated there."""
    if (ROOT / ".git").exists():
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
        ).stdout.decode()
        names = listed.split("\0")
    else:
        sources = ROOT / "src" / "archgap.egg-info" / "SOURCES.txt"
        names = [n for n in sources.read_text().splitlines() if "archgap.egg-info/" not in n]
    return sorted(name for name in names if name and (ROOT / name).is_file())


def tracked_copy(dest: Path) -> Path:
    """A copy of the tracked files under ``dest``, as a clone of the repository would hold."""
    for name in tracked_files():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target, follow_symlinks=False)
    return dest


class Shell:
    """A shell as a newcomer's: the caller's environment (pip's configuration, HOME for its cache)
    with ``bin`` first on PATH, then only the system's directories (never the virtual
    environment the tests run in), plus ``extra`` variables."""

    def __init__(self, bin_dir: Path, path: tuple[Path, ...] = (), **extra: str) -> None:
        self.bin = bin_dir
        self.path = path
        self.extra = extra

    def environment(self) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in _LEAKS and not key.startswith("COVERAGE")
        }
        env["PATH"] = ":".join(
            [str(self.bin), *map(str, self.path), "/usr/local/bin:/usr/bin:/bin"]
        )
        return {**env, **self.extra}

    def shell(self, command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """``command`` as typed into that shell: bash, stdout and stderr together."""
        return subprocess.run(
            ["bash", "-c", command],
            cwd=cwd,
            env=self.environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=INSTALL_TIMEOUT,
        )


class Venv(Shell):
    """A virtual environment made with ``python -m venv``, and a shell activated in it (as
    ``source venv/bin/activate`` leaves it)."""

    def __init__(self, path: Path) -> None:
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
        config = (path / "pyvenv.cfg").read_text()
        assert "include-system-site-packages = false" in config, config
        super().__init__(path / "bin", VIRTUAL_ENV=str(path))
        self.prefix = path


def pipx_shell(home: Path) -> Shell:
    """A shell with pipx (the test extras' own, alone in a directory on PATH) whose home and
    application directory are under ``home``; the applications' directory first on PATH, as
    ``pipx ensurepath`` leaves it."""
    tools = home / "tools"
    tools.mkdir(parents=True)
    (tools / "pipx").symlink_to(Path(sys.executable).parent / "pipx")
    bin_dir = home / "bin"
    return Shell(
        bin_dir,
        (tools,),
        PIPX_HOME=str(home / "pipx"),
        PIPX_BIN_DIR=str(bin_dir),
        PIPX_MAN_DIR=str(home / "man"),
    )
