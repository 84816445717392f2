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


class Venv:
    """A virtual environment made with ``python -m venv``, and a shell activated in it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
        config = (path / "pyvenv.cfg").read_text()
        assert "include-system-site-packages = false" in config, config

    @property
    def bin(self) -> Path:
        return self.path / "bin"

    def environment(self) -> dict[str, str]:
        """The caller's environment (pip's configuration, HOME for its cache) as ``source
        venv/bin/activate`` leaves it: the venv first on PATH, then only the system's
        directories (not the virtual environment the tests run in)."""
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in _LEAKS and not key.startswith("COVERAGE")
        }
        env["PATH"] = f"{self.bin}:/usr/local/bin:/usr/bin:/bin"
        env["VIRTUAL_ENV"] = str(self.path)
        return env

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
