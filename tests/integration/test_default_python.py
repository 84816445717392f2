"""Which environment: without --python, the active virtual environment, else the active conda
environment, else python3 on PATH; never archgap's own by accident, and always said."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import CUDA_BIN, install_fake_distribution, json_output, make_venv, run_cli


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("defaultpy") / "venv"
    site = make_venv(root)
    install_fake_distribution(
        site, "fakekernels", "1.2.3", {"fakekernels/libmix.so": CUDA_BIN / "libmix.so"}
    )
    return root


NO_ENV = {"VIRTUAL_ENV": "", "CONDA_PREFIX": ""}


def scan(env: dict[str, str]) -> tuple[str, str]:
    """(the executable the JSON names, the text's first line)."""
    doc = json_output(run_cli("scan", "--gpu", "12.0", "--json", env=env), "scan")
    text = run_cli("scan", "--gpu", "12.0", env=env).stdout.splitlines()[0]
    return doc["python"]["executable"], text


def test_active_virtual_env(venv: Path) -> None:
    executable, line = scan({**NO_ENV, "VIRTUAL_ENV": str(venv)})
    assert Path(executable).parent == venv / "bin"
    assert line.endswith(f"(VIRTUAL_ENV={venv})")


def test_conda_prefix_when_no_virtual_env(venv: Path) -> None:
    executable, line = scan({**NO_ENV, "CONDA_PREFIX": str(venv)})
    assert Path(executable).parent == venv / "bin" and line.endswith(f"(CONDA_PREFIX={venv})")


def test_python3_on_path(venv: Path) -> None:
    # The venv's bin first on PATH, not activated: its python3 is the one on PATH.
    env = {**NO_ENV, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    executable, line = scan(env)
    assert executable == str(venv / "bin" / "python3")
    assert line.endswith("(python3 on PATH)")
    # gates and trace say it too (the first line of their text).
    gates = run_cli("gates", "fakekernels", env=env)
    assert gates.stdout.splitlines()[0] == f"Python {venv / 'bin' / 'python3'} (python3 on PATH)"
