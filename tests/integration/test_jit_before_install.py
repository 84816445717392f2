"""JIT packages judged before install with the toolchain here, and fixes that know the driver
(issue 38 items 3 and 4).

FlashInfer ships no kernels in its wheel: it compiles them at first use with the nvcc it finds
(flashinfer/jit/cpp_ext.py: CUDA_HOME or CUDA_PATH, else `which nvcc`, else /usr/local/cuda). Its
released rules, read from the wheels (flashinfer/compilation_context.py _normalize_cuda_arch):

- 0.6.6: a GPU of major >= 9 gets an 'a' target with no toolkit check, so an RTX PRO 6000 (12.0)
  is built as compute_120a, which nvcc has from CUDA 12.8 on (CUDA 12.8 release notes).
- 0.6.18 (line 83 of its compilation_context.py): SM 12.x raises "SM 12.x requires CUDA >= 12.9"
  below CUDA 12.9; the broad `except Exception` (line 107) swallows it, TARGET_CUDA_ARCHS stays
  empty and check_cuda_arch() raises "FlashInfer requires GPUs with sm75 or higher".

NVIDIA's driver rule (CUDA toolkit release notes, Table 2, minor-version compatibility): a CUDA
13.x build needs a driver >= 580; 12.x runs on >= 525.60.13. So on a 570 driver a switch to CUDA
13.0 builds code that does not run.

The nvcc stand-ins print real recorded banners (tests/fixtures/nvcc_banners); the wheels are
the real ones from PyPI (scripts/testdata: tests/.data/wheels-jit); the index is nginx on
loopback.
"""

from __future__ import annotations

import os
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import DATA, json_output, run_cli
from tests.loopback_index import NGINX, Listing, nginx_server, write_index
from tests.toolkit_stubs import BANNERS, banner_toolkit, incident_copy, site_packages

WHEELS = DATA / "wheels-jit"
OLD = next(iter(WHEELS.glob("flashinfer_python-0.6.6-*.whl")), None)
NEW = next(iter(WHEELS.glob("flashinfer_python-0.6.18-*.whl")), None)
NVCC_WHEEL_VENV = "venv-nvidia-cuda-nvcc-cu12-12.8.93"
SM75 = "RuntimeError: FlashInfer requires GPUs with sm75 or higher"
TARGET = ("--python-version", "3.12", "--platform", "manylinux_2_28_x86_64")
ENV = {"PIP_INDEX_URL": "", "PIP_EXTRA_INDEX_URL": "", "UV_INDEX_URL": "",
       "PIP_CONFIG_FILE": "/dev/null", "CUDA_PATH": ""}  # fmt: skip

needs_wheels = pytest.mark.skipif(
    OLD is None or NEW is None, reason="scripts/testdata downloads flashinfer-python 0.6.6, 0.6.18"
)


@pytest.fixture(scope="module")
def toolkits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recorded system tree: /usr/local/cuda-12.8 and /usr/local/cuda-12.9 (banner stubs)."""
    root = tmp_path_factory.mktemp("sysroot")
    for version in ("12.8", "12.9"):
        banner_toolkit(root / "usr" / "local", version)
    (root / "empty").mkdir()
    return root


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """flashinfer-python 0.6.6 and 0.6.18 on a loopback index."""
    if NGINX is None or OLD is None or NEW is None:
        pytest.skip("scripts/services installs nginx; scripts/testdata the wheels")
    root = tmp_path_factory.mktemp("index")
    write_index(root / "srv", "main", {"flashinfer-python": [Listing(OLD), Listing(NEW)]}, "simple")
    (root / "nginx").mkdir()
    with nginx_server(root / "srv", root / "nginx") as url:
        yield f"{url}/main/simple"


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def scan(root: Path, *args: str, cuda_home: str = "") -> tuple[int, dict[str, Any]]:
    """scan of archives with the toolchain of the recorded tree ``root`` (no nvcc on PATH)."""
    env = {**ENV, "CUDA_HOME": cuda_home, "PATH": "/usr/bin:/bin"}  # the stubs' cat, no nvcc
    result = run_cli("scan", *args, "--root", str(root), "--json", env=env)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json_output(result, "scan")


def cells(doc: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(p["package"], p["gpu"]): p["verdict"] for p in doc["packages"]}


@needs_wheels
def test_a_requirement_of_a_jit_package_fails_with_the_nvcc_here(
    toolkits: Path, index: str
) -> None:
    """`scan "flashinfer-python==0.6.18" --gpu "RTX PRO 6000"` with nvcc 12.8: 0.6.18's rule
    raises below CUDA 12.9, so the GPU is rejected at the first JIT call: a gap (exit 1), not
    "no gap". With nvcc 12.9 it builds compute_120f: no gap."""
    args = ("flashinfer-python==0.6.18", "--gpu", "RTX PRO 6000", "--index-url", index, *TARGET)
    code, doc = scan(toolkits, *args, cuda_home="/usr/local/cuda-12.8")
    assert code == 1, doc
    assert cells(doc) == {("flashinfer-python", "RTX PRO 6000"): "none"}
    (finding,) = [f for f in doc["jit"] if f["package"] == "flashinfer-python"]
    assert finding["status"] == "fails" and finding["error"] == SM75
    assert "SM 12.x requires CUDA >= 12.9" in finding["cause"]
    assert "nvcc 12.8" in finding["cause"]
    code, doc = scan(toolkits, *args, cuda_home="/usr/local/cuda-12.9")
    assert code == 0, doc
    assert cells(doc) == {("flashinfer-python", "RTX PRO 6000"): "jit"}
    (finding,) = doc["jit"]
    assert finding["status"] == "ok" and "compute_120f" in finding["cause"]
    # no nvcc at all (no CUDA_HOME, none on PATH or in the tree): unknown, with why, and a gap
    code, doc = scan(toolkits / "empty", *args)
    assert code == 1 and cells(doc) == {("flashinfer-python", "RTX PRO 6000"): "unknown"}, doc
    (reason,) = [p["reason"] for p in doc["packages"]]
    assert "no nvcc to judge against" in reason and "CUDA >= 12.9" in reason


@needs_wheels
def test_a_jit_wheel_with_no_toolchain_to_judge_against_is_unknown_and_a_gap(
    toolkits: Path,
) -> None:
    """No CUDA_HOME, nothing on PATH and no /usr/local/cuda in the tree: what FlashInfer will do
    depends on a toolkit archgap cannot see, so the verdict is unknown — never a clean exit 0.
    A GPU below sm75 is rejected whatever the toolkit (check_cuda_arch): none."""
    assert NEW is not None
    args = (str(NEW), "--gpu", "RTX PRO 6000", "--gpu", "V100")
    code, doc = scan(toolkits, *args)
    assert code == 1, doc
    assert cells(doc) == {
        ("flashinfer-python", "RTX PRO 6000"): "unknown",
        ("flashinfer-python", "V100"): "none",
    }
    reasons = {p["gpu"]: p["reason"] for p in doc["packages"]}
    assert "no nvcc to judge against" in reasons["RTX PRO 6000"]
    assert "CUDA >= 12.9" in reasons["RTX PRO 6000"]  # what would build it, by its rules


@needs_wheels
def test_a_wheel_is_judged_with_the_services_toolchain_from_env_from(
    toolkits: Path, tmp_path: Path
) -> None:
    """--env-from names the service's environment: its CUDA_HOME (12.9) decides, not the
    shell's (12.8). A wheel of 0.6.6 with the shell's 12.8 builds compute_120a: jit."""
    assert NEW is not None and OLD is not None
    service = tmp_path / "sglang.env"
    service.write_text("CUDA_HOME=/usr/local/cuda-12.9\n")
    args = (str(NEW), "--gpu", "RTX PRO 6000")
    code, doc = scan(toolkits, *args, "--env-from", str(service), cuda_home="/usr/local/cuda-12.8")
    assert code == 0 and cells(doc) == {("flashinfer-python", "RTX PRO 6000"): "jit"}, doc
    code, doc = scan(toolkits, *args, cuda_home="/usr/local/cuda-12.8")
    assert code == 1 and cells(doc) == {("flashinfer-python", "RTX PRO 6000"): "none"}, doc
    code, doc = scan(toolkits, str(OLD), "--gpu", "RTX PRO 6000", cuda_home="/usr/local/cuda-12.8")
    assert code == 0 and cells(doc) == {("flashinfer-python", "RTX PRO 6000"): "jit"}, doc
    with zipfile.ZipFile(NEW) as zf:  # the rule is in the wheel's own source
        source = zf.read("flashinfer/compilation_context.py").decode()
    assert 'raise RuntimeError("SM 12.x requires CUDA >= 12.9")' in source


@needs_wheels
def test_versions_recommends_the_release_that_builds_with_the_nvcc_here(
    toolkits: Path, index: str
) -> None:
    """With nvcc 12.8, 0.6.18 fails on an RTX PRO 6000 and 0.6.6 builds compute_120a: the
    release to install is 0.6.6, not the newest. With nvcc 12.9 it is 0.6.18. The nvcc is this
    machine's as FlashInfer finds it: CUDA_HOME, naming a stand-in by its full path."""
    args = ("flashinfer-python", "--gpu", "RTX PRO 6000", "--index-url", index, *TARGET)
    for version, winner, rows in (
        ("12.8", "0.6.6", [("0.6.18", "none"), ("0.6.6", "jit")]),
        ("12.9", "0.6.18", [("0.6.18", "jit"), ("0.6.6", "jit")]),
    ):
        home = str(toolkits / "usr" / "local" / f"cuda-{version}")
        result = run_cli("versions", *args, "--json", env={**ENV, "CUDA_HOME": home})
        assert "Traceback" not in result.stderr, result.stderr
        doc = json_output(result, "versions")
        found = [(v["version"], v["verdicts"][0]["verdict"]) for v in doc["versions"]]
        assert found == rows, doc
        assert doc["winner"]["version"] == winner
        assert doc["install"].endswith(f"flashinfer-python=={winner}")


# --- item 4: fixes that know the driver, and a CUDA_HOME without nvcc -----------------------


@pytest.fixture(scope="module")
def incident(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the real flashinfer-python 0.6.8 venv, with a recorded tree beside it holding
    /usr/local/cuda-12.8 and /usr/local/cuda-13.0 (banner stand-ins)."""
    root = incident_copy(tmp_path_factory.mktemp("incident"))
    local = root / "sysroot" / "usr" / "local"
    banner_toolkit(local, "12.8")
    thirteen = local / "cuda-13.0" / "bin"
    thirteen.mkdir(parents=True)
    (thirteen / "nvcc").write_text(f"#!/bin/sh\ncat '{BANNERS / 'nvcc-13.0.txt'}'\n")
    (thirteen / "nvcc").chmod(0o755)
    (root / "sysroot" / "empty").mkdir()
    return root


def fix_plan(root: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    python = str(root / "venv" / "bin" / "python")
    args = ["fix", "--python", python, "--gpu", "RTX PRO 6000", "--root", str(root / "sysroot")]
    args += ["--state-dir", str(root / "state"), "--json", *extra]
    env = {"CUDA_HOME": "/usr/local/cuda-12.8", "CUDA_PATH": "", "PATH": os.environ["PATH"]}
    result = run_cli(*args, env=env)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json_output(result, "fix")


def test_a_toolkit_the_driver_cannot_run_is_not_the_first_fix(incident: Path) -> None:
    """FlashInfer 0.6.8 with nvcc 12.8 on an RTX PRO 6000 fails; CUDA 13.0's nvcc would build
    compute_120f. On a 580 driver that switch is fix 1; on a 570 driver (CUDA 13.x needs >= 580)
    it says the driver must be upgraded first, comes after the fixes the driver can run, and
    carries no CUDA_HOME for --apply to write."""
    code, doc = fix_plan(incident, "--driver", "580.65.06")
    assert code == 1
    first = doc["actions"][0]
    assert first["kind"] == "toolkit" and first["env"] == [["CUDA_HOME", "/usr/local/cuda-13.0"]]
    code, doc = fix_plan(incident, "--driver", "570.124.06")
    assert code == 1
    first = doc["actions"][0]
    assert first["kind"] == "env", doc["actions"]
    assert first["env"] == [["FLASHINFER_CUDA_ARCH_LIST", "12.0a"]]
    assert ["CUDA_HOME", "/usr/local/cuda-13.0"] not in [
        p for a in doc["actions"] for p in a["env"]
    ]
    python = str(incident / "venv" / "bin" / "python")
    env = {"CUDA_HOME": "/usr/local/cuda-12.8", "CUDA_PATH": "", "COLUMNS": "400"}
    args = ("--python", python, "--gpu", "RTX PRO 6000", "--root", str(incident / "sysroot"))
    text = run_cli("scan", *args, "--driver", "570.124.06", env=env).stdout
    fixes = [line.strip() for line in text.splitlines() if line.strip().startswith("fix ")]
    driver = next(i for i, f in enumerate(fixes) if "/usr/local/cuda-13.0" in f)
    assert "upgrade the NVIDIA driver (driver 570.124.06 cannot run CUDA 13.0)" in fixes[driver]
    assert fixes[0].startswith('fix 1: export FLASHINFER_CUDA_ARCH_LIST="12.0a"'), fixes
    assert driver > 0 and all("avoid" in f for f in fixes[driver + 1 :] if "toolkit" not in f)


def test_a_cuda_home_without_nvcc_is_named_and_gets_no_fix_that_keeps_it(
    incident: Path, tmp_path: Path
) -> None:
    """The PyPI nvidia-cuda-nvcc-cu12 12.8.93 wheel holds bin/ptxas and no bin/nvcc: a CUDA_HOME
    at it builds nothing (FlashInfer runs $CUDA_HOME/bin/nvcc). Not "nvcc 12.8 is too old", and
    no FLASHINFER_CUDA_ARCH_LIST or patch (they keep that toolkit, which cannot compile)."""
    wheel_sites = site_packages(NVCC_WHEEL_VENV)
    if not wheel_sites:
        pytest.skip("scripts/testdata has not installed nvidia-cuda-nvcc-cu12 12.8.93")
    (wheel_site,) = wheel_sites
    venv = tmp_path / "venv"
    shutil.copytree(incident / "venv", venv, symlinks=True)
    (site,) = venv.glob("lib/python*/site-packages")
    for name in ("nvidia", "nvidia_cuda_nvcc_cu12-12.8.93.dist-info"):
        shutil.copytree(Path(wheel_site) / name, site / name, symlinks=True)
    home = site / "nvidia" / "cuda_nvcc"
    assert (home / "bin" / "ptxas").exists() and not (home / "bin" / "nvcc").exists()
    result = run_cli(
        "scan", "--python", str(venv / "bin" / "python"), "--gpu", "RTX PRO 6000", "--json",
        env={"CUDA_HOME": str(home), "CUDA_PATH": ""},
    )  # fmt: skip
    doc = json_output(result, "scan")
    assert result.returncode == 1, doc
    (finding,) = [f for f in doc["jit"] if f["package"] == "flashinfer-python"]
    assert finding["status"] == "fails"
    assert (
        f"CUDA_HOME={home} has no bin/nvcc (ptxas only): nothing can build there"
        in (finding["cause"])
    )
    assert "too old" not in finding["cause"]
    kinds = [f["kind"] for f in finding["fixes"]]
    assert "env" not in kinds and "patch" not in kinds, finding["fixes"]
    # what is left moves the JIT to a toolkit with an nvcc (another home, or one to install)
    toolkit = [f for f in finding["fixes"] if f["kind"] == "toolkit"]
    assert toolkit and all(str(home) not in f["action"] for f in toolkit), finding["fixes"]


def test_explain_ranks_a_toolkit_switch_by_the_driver_named(incident: Path, tmp_path: Path) -> None:
    """The incident's log explained on its environment: with --driver 580 the switch to CUDA
    13.0 is the first fix; with --driver 570 (CUDA 13.x needs >= 580) it says the driver must be
    upgraded and comes after the fixes that keep the 12.8 toolkit."""
    log = tmp_path / "sglang.log"
    log.write_text(
        "WARNING flashinfer: Failed to get device capability: SM 12.x requires CUDA >= 12.9.\n"
        f"{SM75}\n"
    )
    python = str(incident / "venv" / "bin" / "python")
    args = ["explain", str(log), "--python", python, "--gpu", "RTX PRO 6000"]
    args += ["--root", str(incident / "sysroot"), "--json"]
    env = {"CUDA_HOME": "/usr/local/cuda-12.8", "CUDA_PATH": ""}
    first: dict[str, list[str]] = {}
    for driver in ("580.65.06", "570.124.06"):
        result = run_cli(*args, "--driver", driver, env=env)
        fixes = [f["text"] for f in json_output(result, "explain")["explain"]["fixes"]]
        first[driver] = fixes
    assert first["580.65.06"][0].startswith("point CUDA_HOME at /usr/local/cuda-13.0")
    fixes = first["570.124.06"]
    assert fixes[0].startswith('export FLASHINFER_CUDA_ARCH_LIST="12.0a"'), fixes
    (switch,) = [f for f in fixes if "/usr/local/cuda-13.0" in f]
    assert switch.startswith("upgrade the NVIDIA driver (driver 570.124.06 cannot run CUDA 13.0)")
