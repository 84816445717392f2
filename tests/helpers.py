"""Shared test helpers: run the real CLI, validate its JSON against the shipped schema."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import jsonschema
import pytest

from archgap.report.jsondoc import schema

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
CUDA_BIN = FIXTURES / "cuda" / "bin"
DATA = ROOT / "tests" / ".data"
TESTDATA = "run scripts/testdata"


def missing_data(*names: str) -> str | None:
    """Why tests/.data/NAME is not there to read (a skip reason that says ``run scripts/testdata``),
    or None when scripts/testdata has finished installing every one (its ``.complete`` mark: a
    download cut short is missing too)."""
    absent = [name for name in names if not (DATA / name / ".complete").exists()]
    return f"{TESTDATA} (tests/.data/{', '.join(absent)} missing)" if absent else None


def need_data(*names: str) -> list[Path]:
    """The test data ``tests/.data/NAME`` for each name, or the test skips with ``run
    scripts/testdata``: the fast loop (``pytest tests/unit``) runs without the 2.4 GB of data.
    Under ``CI=true`` a skip is a failure (tests/conftest.py), so CI still needs all of it."""
    reason = missing_data(*names)
    if reason:
        pytest.skip(reason)
    return [DATA / name for name in names]


def needs_data(*names: str) -> pytest.MarkDecorator:
    """``need_data`` as a mark, for a whole module or test (``pytestmark = needs_data(...)``).
    Module-level code still runs without the data: it may name paths there, never read them."""
    reason = missing_data(*names)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def run_cli(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python -m archgap ARGS`` as a user runs it (a separate process, no TTY)."""
    return subprocess.run(
        [sys.executable, "-m", "archgap", *args],
        capture_output=True,
        text=True,
        input=stdin,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        check=False,
    )


def json_output(result: subprocess.CompletedProcess[str], command: str) -> dict[str, Any]:
    """The command's JSON document, validated against its schema file."""
    doc: dict[str, Any] = json.loads(result.stdout)
    jsonschema.validate(doc, schema(command))
    assert doc["command"] == command
    return doc


def wait_for_port(host: str, port: int, seconds: float) -> None:
    """Until a server accepts connections on host:port, or ``seconds`` have passed (the test
    that needs it then fails on its first request, with that request's error)."""
    import socket
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)


def vermin(path: Path) -> subprocess.CompletedProcess[str]:
    """``vermin`` on a file or directory: its returncode is 0 when every line runs on Python 3.8
    (the probe's floor), else it lists the violations."""
    import shutil

    command = shutil.which("vermin") or str(Path(sys.executable).parent / "vermin")
    return subprocess.run(
        [command, "-t=3.8-", "--no-tips", "--violations", "--eval-annotations", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


def make_venv(path: Path) -> Path:
    """A real, empty virtual environment; returns its site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    (site,) = path.glob("lib/python*/site-packages")
    return site


def install_fake_distribution(site: Path, name: str, version: str, files: dict[str, Path]) -> None:
    """A hand-built distribution: copies ``files`` (relative path -> source) and writes a RECORD."""
    dist_info = site / f"{name}-{version}.dist-info"
    dist_info.mkdir()
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    (dist_info / "METADATA").write_text(metadata)
    rows = []
    for relative, source in files.items():
        target = site / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
        rows.append(f"{relative},,")
    rows += [f"{dist_info.name}/METADATA,,", f"{dist_info.name}/RECORD,,"]
    (dist_info / "RECORD").write_text("\n".join(rows) + "\n")


def in_child(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` in a fresh interpreter (spawned, not forked), its result pickled back.

    For tests that read a large real file in-process (a 127 MiB wheel member): the pytest
    process's peak RSS would otherwise grow by it, and Linux carries a process's peak into the
    ru_maxrss of every child it starts later (the memory-bound tests measure their children)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(function, *args).result(timeout=300)


def tree_hashes(root: Path) -> dict[str, str]:
    """Every regular file under ``root`` (links not followed) and the sha256 of its bytes."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def kernel_wheel(folder: Path, library: bytes) -> Path:
    """A wheel holding one kernel library (kpkg/libk.so) and the dist-info pip writes."""
    folder.mkdir()
    path = folder / "kpkg-1.0-py3-none-linux_x86_64.whl"
    info = "kpkg-1.0.dist-info"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("kpkg/libk.so", library)
        zf.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: kpkg\nVersion: 1.0\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\n")
        zf.writestr(f"{info}/RECORD", f"kpkg/libk.so,,\n{info}/METADATA,,\n{info}/RECORD,,\n")
    return path


def member_wheel(site: Path, member: str, info: str, wheel: Path) -> Path:
    """A wheel of one installed file (``site/member``, its bytes as installed) and its
    distribution's METADATA, deflated as pip's wheels are: the streamed reading of that member
    must equal the file reader's over the installed file."""
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.write(site / member, member)
        zf.write(site / info / "METADATA", f"{info}/METADATA")
        zf.writestr(f"{info}/RECORD", f"{member},,\n{info}/METADATA,,\n{info}/RECORD,,\n")
    return wheel


def good_and_old_venvs(base: Path) -> dict[str, Path]:
    """Two environments' interpreters, each with one fake distribution: "good" holds
    tests/fixtures/cuda's libmix.so (fakekernels 1.2.3), "old" its PTX-only libptxonly.so
    (ptxkernels 0.1)."""
    install_fake_distribution(make_venv(base / "good"), "fakekernels", "1.2.3",
                              {"fakekernels/libmix.so": CUDA_BIN / "libmix.so"})  # fmt: skip
    install_fake_distribution(make_venv(base / "old"), "ptxkernels", "0.1",
                              {"ptxkernels/libptx.so": CUDA_BIN / "libptxonly.so"})  # fmt: skip
    return {"good": base / "good" / "bin" / "python", "old": base / "old" / "bin" / "python"}


def stand_in_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, names: tuple[str, ...]
) -> None:
    """The probe's loader section sees only empty stand-ins of ``names`` in one trusted
    directory, no cache and no toolkits: what this machine has installed (a system cuBLAS, a
    CUDA toolkit) changes nothing in a test."""
    from archgap.probe.environment import loader as loader_probe

    trusted = tmp_path / "trusted"
    trusted.mkdir()
    for name in names:
        (trusted / name).write_bytes(b"")
    monkeypatch.setattr(loader_probe, "LOADER_CACHE", str(tmp_path / "no-ld.so.cache"))
    monkeypatch.setattr(loader_probe, "LOADER_DEFAULT_DIRS", (str(trusted),))
    monkeypatch.setattr(loader_probe, "TOOLKITS", str(tmp_path / "no-toolkits"))
