"""A companion pin the dynamic loader does not hold a package to: a note, not a block.

The torch case of issue 38 on real parts: torch 2.15.0 pins nvidia-cudnn-cu13==9.26.0.51 and
its ``libtorch_cuda.so`` needs ``libcudnn.so.9``; with 9.28.1.4 installed, ``pip check``
reports the pin, yet the process loads: ld.so(8) binds a DT_NEEDED name to the file of that
name, and NVIDIA keeps a library's ABI within its soname's major (cuDNN's API compatibility:
a minor release runs what was built against the same or an earlier minor).

Here: the real nvidia-curand 10.4.0.35 wheel (tests/.data/venv-nvidia-curand-10.4.0.35,
``nvidia/cu13/lib/libcurand.so.10``, DT_SONAME ``libcurand.so.10``) and a package built here
whose METADATA says ``Requires-Dist: nvidia-curand==10.3.0`` and whose library, linked by gcc
against that file, needs ``libcurand.so.10`` (readelf -d). Expectations:
- pinned 10.3.0, 10.4.0.35 installed (newer): a ``note`` naming the pin and the soname; no
  library blocked; curand native on H100 with driver 580 (CUDA 13 needs >= 580); exit 0;
- pinned 10.5.0 (installed older than the release built against): ``unknown`` (it may need
  symbols the older one lacks), no block, exit 0;
- the same requirer with a library that needs nothing of curand (the jax pjrt/plugin shape:
  an exact pin the loader plays no part in): a ``fails`` finding on the requirer, its library
  blocked, exit 1 (tests/integration/test_load_companions.py holds the real jax pair).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import DATA, json_output, need_data, run_cli

CURAND = DATA / "venv-nvidia-curand-10.4.0.35"
SITE = "lib/python3.11/site-packages"


def _venv(root: Path, pin: str, link_curand: bool) -> Path:
    """A venv with the real curand wheel's files (linked in) and a package 'requirer' whose
    library is built with gcc, linked against the real libcurand.so.10 or not."""
    need_data(CURAND.name)
    if shutil.which("gcc") is None:
        pytest.fail("gcc builds the requirer's library (the project's dev image has it)")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = root / SITE
    if not site.is_dir():  # the test interpreter's own version
        site = next(root.glob("lib/python*/site-packages"))
    real = CURAND / SITE
    os.symlink(real / "nvidia", site / "nvidia")
    shutil.copytree(
        real / "nvidia_curand-10.4.0.35.dist-info", site / "nvidia_curand-10.4.0.35.dist-info"
    )
    pkg = site / "requirer"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    source = root / "req.c"
    code = "int req(void) { return 0; }\n"
    if link_curand:  # calls cuRAND: the link needs libcurand.so.10, and DT_NEEDED keeps it
        code = "int curandCreateGenerator(void *, int);\n"
        code += "int req(void *g) { return curandCreateGenerator(g, 100); }\n"
    source.write_text(code)
    lib = real / "nvidia/cu13/lib"
    args = ["gcc", "-shared", "-fPIC", "-o", str(pkg / "libreq.so"), str(source)]
    if link_curand:
        args += [f"-L{lib}", "-l:libcurand.so.10", "-Wl,-rpath,$ORIGIN/../nvidia/cu13/lib"]
    subprocess.run(args, check=True)
    info = site / "requirer-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: requirer\nVersion: 1.0\n"
        f"Requires-Dist: nvidia-curand=={pin}\n"
    )
    (info / "RECORD").write_text(
        "requirer/__init__.py,,\nrequirer/libreq.so,,\nrequirer-1.0.dist-info/METADATA,,\n"
        "requirer-1.0.dist-info/RECORD,,\n"
    )
    return root / "bin" / "python"


def _scan(python: Path) -> tuple[int, dict]:  # type: ignore[type-arg]
    result = run_cli(
        "scan",
        "--python",
        str(python),
        "--gpu",
        "H100",
        "--libs",
        "--driver",
        "580.65.06",
        "--json",
    )
    return result.returncode, json_output(result, "scan")


def _needed(path: Path) -> list[str]:
    out = subprocess.run(["readelf", "-dW", str(path)], capture_output=True, text=True).stdout
    return [line.split("[")[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


def test_a_pin_the_loader_binds_by_soname_is_a_note(tmp_path: Path) -> None:
    python = _venv(tmp_path / "v", "10.3.0", link_curand=True)
    assert "libcurand.so.10" in _needed(next(tmp_path.glob(f"v/{SITE[:3]}*/**/libreq.so")))
    code, doc = _scan(python)
    (finding,) = [f for f in doc["load"] if f["check"] == "companion"]
    assert finding["status"] == "note" and finding["package"] == "requirer"
    assert "nvidia-curand==10.3.0" in finding["cause"] and "libcurand.so.10" in finding["cause"]
    assert not finding["gates_exit_code"]
    rows = {
        lib["path"].rsplit("/", 1)[1]: lib
        for p in doc["packages"]
        for lib in p.get("libraries") or []
    }
    assert rows["libcurand.so.10"]["verdict"] == "native"
    assert not rows["libcurand.so.10"].get("load")
    assert code == 0


def test_an_older_companion_than_the_pin_is_unknown_not_blocked(tmp_path: Path) -> None:
    code, doc = _scan(_venv(tmp_path / "v", "10.5.0", link_curand=True))
    (finding,) = [f for f in doc["load"] if f["check"] == "companion"]
    assert finding["status"] == "unknown" and "older" in finding["cause"]
    curand = [lib for p in doc["packages"] for lib in p.get("libraries") or []
              if lib["path"].endswith("libcurand.so.10")]  # fmt: skip
    assert curand and all(lib["verdict"] == "native" for lib in curand)
    assert code == 0


def test_a_pin_with_no_soname_between_them_still_fails(tmp_path: Path) -> None:
    code, doc = _scan(_venv(tmp_path / "v", "10.3.0", link_curand=False))
    (finding,) = [f for f in doc["load"] if f["check"] == "companion"]
    assert finding["status"] == "fails" and finding["package"] == "requirer"
    assert any(p.endswith("requirer/libreq.so") for p in finding["libraries"])
    assert finding["gates_exit_code"] and code == 1
