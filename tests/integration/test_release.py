"""A release as the package index will get it: the sdist and the wheel built by ``python -m build``
(isolated, the build backend from the index) from a copy of the tracked files, checked by ``twine
check --strict``, and the wheel installed into a fresh virtual environment where the installed
command runs. The version lives in one place, src/archgap/__init__.py."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import CUDA_BIN, ROOT
from tests.integration.freshinstall import INSTALL_TIMEOUT, Venv, tracked_copy, tracked_files

# What setuptools writes into an sdist besides the tracked files (the metadata it generated).
GENERATED = re.compile(r"PKG-INFO|setup\.cfg|src/archgap\.egg-info/[^/]+")


def version_in_source() -> str:
    """The one place the version is written: ``__version__`` in src/archgap/__init__.py."""
    text = (ROOT / "src" / "archgap" / "__init__.py").read_text()
    found = re.findall(r'^__version__ = "([^"]+)"$', text, re.M)
    assert len(found) == 1, found
    return str(found[0])


@dataclass(frozen=True)
class Release:
    checkout: Path
    dist: Path
    log: str
    version: str

    def artifact(self, suffix: str) -> Path:
        found = sorted(self.dist.glob(f"*{suffix}"))
        assert len(found) == 1, (found, self.log[-3000:])
        return found[0]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    home = tmp_path_factory.mktemp("release")
    checkout = tracked_copy(home / "archgap")
    dist = home / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(checkout)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=INSTALL_TIMEOUT,
    )
    assert built.returncode == 0, built.stdout[-4000:]
    yield Release(checkout, dist, built.stdout, version_in_source())


@pytest.fixture(scope="module")
def installed(release: Release, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    venv = Venv(tmp_path_factory.mktemp("wheel-venv") / "venv")
    wheel = release.artifact(".whl")
    done = venv.shell(f"pip install '{wheel}'", cwd=release.dist)
    assert done.returncode == 0, done.stdout[-4000:]
    return venv


def test_the_version_is_written_once() -> None:
    # tomllib from Python 3.11; its backport, tomli, on 3.10 (a dependency there).
    tomllib = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
    project: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "archgap.__version__"}
    # No other module states it: what needs it imports archgap.__version__.
    source = ROOT / "src" / "archgap"
    for path in source.rglob("*.py"):
        if path != source / "__init__.py":
            text = path.read_text(encoding="utf-8")
            assert "__version__ =" not in text and f'"{version_in_source()}"' not in text, path


def test_the_artifacts_carry_the_version_and_build_without_deprecations(release: Release) -> None:
    assert release.artifact(".tar.gz").name == f"archgap-{release.version}.tar.gz"
    assert release.artifact(".whl").name == f"archgap-{release.version}-py3-none-any.whl"
    # setuptools announces the calls it will stop accepting (the TOML-table license: "By
    # 2027-Feb-18 ... your builds will no longer be supported"); a release builds without any.
    deprecated = [line for line in release.log.splitlines() if "deprecat" in line.lower()]
    assert not deprecated, deprecated


def test_twine_check_passes(release: Release) -> None:
    artifacts = [str(release.artifact(".tar.gz")), str(release.artifact(".whl"))]
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *artifacts],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "HOME": str(release.dist)},
        timeout=300,
    )
    assert checked.returncode == 0, checked.stdout
    assert checked.stdout.count("PASSED") == 2, checked.stdout


def test_the_sdist_holds_every_tracked_file(release: Release) -> None:
    """Tests, docs (mkdocs.yml, docs/hooks), scripts and benchmarks build and run from the sdist;
    test data is not tracked (scripts/testdata fetches it), so it is not in the sdist either."""
    prefix = f"archgap-{release.version}/"
    with tarfile.open(release.artifact(".tar.gz")) as sdist:
        names = {m.name.removeprefix(prefix) for m in sdist.getmembers() if m.isfile()}
    generated = {name for name in names if GENERATED.fullmatch(name)}
    assert {"PKG-INFO", "src/archgap.egg-info/SOURCES.txt"} <= generated
    assert names - generated == set(tracked_files())
    assert not any(name.startswith(("tests/.data/", "bench/.data/")) for name in names)


def test_the_wheel_holds_the_package_and_its_data(release: Release) -> None:
    source = release.checkout / "src"
    expected = {
        str(path.relative_to(source))
        for path in (source / "archgap").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    with zipfile.ZipFile(release.artifact(".whl")) as wheel:
        names = set(wheel.namelist())
        info = f"archgap-{release.version}.dist-info"
        metadata = HeaderParser().parsestr(wheel.read(f"{info}/METADATA").decode())
    assert {name for name in names if name.startswith("archgap/")} == expected
    # What the code reads at run time beside the modules, each present by its own rule.
    for wanted in ("archgap/py.typed", "archgap/probe/__init__.py", "archgap/kb/gpus.json"):
        assert wanted in names, wanted
    assert any(re.fullmatch(r"archgap/schema/[^/]+\.json", n) for n in names)
    assert f"{info}/licenses/LICENSE" in names
    assert metadata["Version"] == release.version
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["Requires-Python"] == ">=3.10"


def test_the_installed_wheel_runs(installed: Venv, release: Release) -> None:
    version = installed.shell("archgap --version", cwd=release.dist)
    assert version.returncode == 0 and version.stdout.strip() == f"archgap {release.version}"
    # libptxonly.so is built with -gencode arch=compute_80,code=compute_80 (tests/fixtures/cuda/
    # build.sh): PTX alone. An H100 is compute capability 9.0 (NVIDIA's CUDA GPUs table); under
    # --strict only SASS counts, so the gate fails: exit 1 (README, exit codes). It needs the
    # GPU table (kb/*.json) from the wheel's package data.
    library = CUDA_BIN / "libptxonly.so"
    gate = installed.shell(f"archgap kernels '{library}' --require H100 --strict", cwd=release.dist)
    assert gate.returncode == 1, gate.stdout
    lines = [line.split() for line in gate.stdout.splitlines()]
    assert ["compute_80", "ptx"] in [row[:2] for row in lines], gate.stdout
    assert any(line.startswith("require H100 (9.0)") for line in gate.stdout.splitlines())
    assert "FAIL" in gate.stdout
