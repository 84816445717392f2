"""Stub CUDA toolkits for tests: a ``bin/nvcc`` that prints a real recorded ``nvcc --version``
banner (tests/fixtures/nvcc_banners, sources in SOURCES.md), one that hangs, one that crashes.
They stand in at the process boundary only: no nvcc 12.6/12.8/12.9 exists on these machines."""

from __future__ import annotations

import glob
import os
import shutil
import time
from pathlib import Path

from tests.hangs import GUARD
from tests.helpers import DATA, FIXTURES, need_data

BANNERS = FIXTURES / "nvcc_banners"
REAL_CUDA_13 = Path("/usr/local/cuda-13.0")


def _script(home: Path, body: str) -> Path:
    (home / "bin").mkdir(parents=True, exist_ok=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\n" + body + "\n")
    nvcc.chmod(0o755)
    return home


def banner_toolkit(root: Path, version: str) -> Path:
    """A toolkit whose nvcc prints the recorded banner of CUDA ``version`` (12.6, 12.8, 12.9)."""
    banner = BANNERS / f"nvcc-{version}.txt"
    return _script(root / f"cuda-{version}", f"cat '{banner}'")


def hanging_toolkit(root: Path) -> Path:
    return _script(root / "cuda-hangs", "exec sleep 60")


def crashing_toolkit(root: Path) -> Path:
    return _script(root / "cuda-crashes", "kill -SEGV $$")


def toolkit(root: Path, version: str) -> Path:
    """The real nvcc 13.0 where it exists, a recorded banner otherwise."""
    if version == "13.0" and (REAL_CUDA_13 / "bin" / "nvcc").exists():
        return REAL_CUDA_13
    if version == "13.0":
        raise FileNotFoundError("no nvcc 13.0 and no recorded 13.0 banner")
    return banner_toolkit(root, version)


def venv_python(name: str) -> Path:
    return DATA / name / "bin" / "python"


INCIDENT_VENV = "venv-flashinfer-python-0.6.8"


def incident_copy(root: Path) -> Path:
    """The seed incident to change freely: a copy of the real flashinfer-python 0.6.8 venv at
    ``root/venv`` (tests/.data is never modified) beside a CUDA 12.8 nvcc banner at
    ``root/cuda-12.8``; the test skips with ``run scripts/testdata`` (fails under CI) where
    it is not installed."""
    (source,) = need_data(INCIDENT_VENV)
    shutil.copytree(source, root / "venv", symlinks=True)
    banner_toolkit(root, "12.8")
    return root


def site_packages(name: str) -> tuple[str, ...]:
    """The site-packages of the test venv ``tests/.data/NAME``; the test skips with ``run
    scripts/testdata`` where it is not installed (``need_data``)."""
    (venv,) = need_data(name)
    return tuple(glob.glob(os.path.join(venv, "lib", "python*", "site-packages")))


def wait_for_exec(pid: int) -> None:
    # Between fork and exec the child still shows the parent's image; wait for `sleep` (a test
    # that went on before would read the parent's environment). The deadline is a hang guard.
    deadline = time.monotonic() + GUARD
    while not Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep"):
        assert time.monotonic() < deadline, f"process {pid} did not exec sleep"
        time.sleep(0.01)
