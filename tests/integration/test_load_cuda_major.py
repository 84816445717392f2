"""A library's CUDA major from what its bytes say, and the driver floor that follows.

Expectations, from first principles (not from archgap):
- nvcc 13.0 (tests/nvcc_build.py) with ``-cudart static`` links CUDA 13.0's runtime into the
  library itself: nothing in its DT_NEEDED, its path or its package's name says CUDA 13.
- ptxas and nvlink write their banner, "Cuda compilation tools, release 13.0", into each cubin's
  ``.note.nv.tkinfo`` (the test finds it in the file's bytes itself); PTX ISA 9.0 is the ISA
  CUDA 13.0 introduced (the PTX ISA's release history).
- NVIDIA's CUDA 13.2.2 release notes, Table 2 (minor-version compatibility): a CUDA 13.x runtime
  needs a driver >= 580. 570.124.06 (CUDA 12.8's) and 535.104.05 (12.2's) run none: the runtime
  fails with 'CUDA driver version is insufficient for CUDA runtime version'. 580.65.06 does.
- warp-lang 1.19.0 (scripts/testdata) says so of itself, in its METADATA: "PyPI and nightly
  wheels for Linux and Windows use CUDA Toolkit 13.4. They require an NVIDIA R580-series or
  newer driver"; its warp.so needs no libcudart (its runtime is linked in).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import DATA, install_fake_distribution, json_output, make_venv, run_cli
from tests.nvcc_build import build_all

STATIC = ["-shared", "-Xcompiler", "-fPIC", "-cudart", "static"]
BANNER_13_0 = b"Cuda compilation tools, release 13.0"
WARP = DATA / "venv-warp-lang-1.19.0"


@pytest.fixture(scope="module")
def static_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two packages, each one library built by nvcc 13.0 with its runtime linked statically:
    sasslib holds sm_80 SASS only, fatlib sm_80 SASS and compute_80 PTX."""
    libs = build_all(
        {
            "sass": ([*STATIC, "-gencode", "arch=compute_80,code=sm_80"], "-static-sass.so"),
            "fat": (
                [*STATIC, "-gencode", "arch=compute_80,code=[sm_80,compute_80]"],
                "-static-fat.so",
            ),
        }
    )
    for lib in libs.values():
        data = lib.read_bytes()
        assert BANNER_13_0 in data  # the cubins' toolkit note, as nvcc 13.0 wrote it
        assert b"libcudart.so" not in data  # nothing names the shared runtime
    root = tmp_path_factory.mktemp("static-cuda13") / "venv"
    site = make_venv(root)
    install_fake_distribution(site, "sasslib", "1.0", {"sasslib/libsass.so": libs["sass"]})
    install_fake_distribution(site, "fatlib", "1.0", {"fatlib/libfat.so": libs["fat"]})
    return root / "bin" / "python"


def scan(python: Path, gpus: list[str], driver: str) -> tuple[dict[str, Any], int, str]:
    args = [a for gpu in gpus for a in ("--gpu", gpu)]
    result = run_cli("scan", "--python", str(python), *args, "--driver", driver, "--json")
    text = run_cli("scan", "--python", str(python), *args, "--driver", driver)
    assert text.returncode == result.returncode
    return json_output(result, "scan"), result.returncode, text.stdout


EVIDENCE = {
    # SASS only: the cubins' toolkit note decides
    "sasslib": "needs driver >= 580 (CUDA 13: its cubins' toolkit note says 'Cuda compilation "
    "tools, release 13.0')",
    # PTX beside it: its ISA decides first
    "fatlib": "needs driver >= 580 (CUDA 13: its PTX is ISA 9.0, which CUDA 13.0 emits)",
}


@pytest.mark.parametrize("driver", ["570.124.06", "535.104.05"])
def test_a_static_cuda_13_runtime_cannot_run_below_580(static_env: Path, driver: str) -> None:
    doc, code, text = scan(static_env, ["A100"], driver)
    verdicts = {p["package"]: p["verdict"] for p in doc["packages"]}
    # kernels for the A100 that only the driver stops: blocked (a newer driver), not none
    assert verdicts == {"sasslib": "blocked", "fatlib": "blocked"}
    findings = {f["package"]: f for f in doc["load"] if f["check"] == "driver-cuda"}
    assert sorted(findings) == ["fatlib", "sasslib"]
    for package, evidence in EVIDENCE.items():
        finding = findings[package]
        assert finding["status"] == "fails" and evidence in finding["cause"]
        assert f"driver {driver} does not run CUDA 13" in finding["cause"]
        assert "driver >= 580" in finding["fix"] and "Table 2" in finding["source"]
        (library,) = [
            lib for p in doc["packages"] if p["package"] == package for lib in p["libraries"]
        ]
        assert evidence in library["load"]
    assert code == 1
    assert EVIDENCE["sasslib"] in text and EVIDENCE["fatlib"] in text


def test_a_static_cuda_13_runtime_runs_on_580(static_env: Path) -> None:
    doc, code, _ = scan(static_env, ["A100"], "580.65.06")
    assert {p["package"]: p["verdict"] for p in doc["packages"]} == {
        "sasslib": "native",
        "fatlib": "native",
    }
    assert doc["load"] == [] and code == 0


@pytest.mark.skipif(not WARP.exists(), reason="scripts/testdata installs warp-lang==1.19.0")
@pytest.mark.parametrize(("driver", "runs"), [("570.124.06", False), ("580.65.06", True)])
def test_warp_lang_needs_the_r580_driver_its_metadata_names(driver: str, runs: bool) -> None:
    (metadata,) = WARP.glob("lib/python*/site-packages/warp_lang-1.19.0.dist-info/METADATA")
    said = " ".join(metadata.read_text().split())
    assert "use CUDA Toolkit 13.4. They require an NVIDIA R580-series or newer driver" in said
    (warp_so,) = WARP.glob("lib/python*/site-packages/warp/bin/warp.so")
    assert b"libcudart.so" not in warp_so.read_bytes()  # its runtime is linked in
    doc, code, _ = scan(WARP / "bin" / "python", ["H100", "A100"], driver)
    # installed --no-deps: its import needs numpy (warp/_src/types.py line 31, Requires-Dist:
    # numpy), which is not there; that companion alone blocks it once the driver runs it
    (companion,) = [f for f in doc["load"] if f["check"] == "companion"]
    assert "No module named 'numpy'" in companion["cause"]
    verdicts = {(p["package"], p["gpu"]): p["verdict"] for p in doc["packages"]}
    assert verdicts == {("warp-lang", "H100"): "blocked", ("warp-lang", "A100"): "blocked"}
    findings = [f for f in doc["load"] if f["check"] == "driver-cuda"]
    if runs:  # its sm_80/sm_90 SASS runs once the driver does: only the companion is missing
        loads = {lib["load"] for p in doc["packages"] for lib in p["libraries"] if lib["load"]}
        assert loads and all("numpy" in why and "driver" not in why for why in loads)
        assert findings == [] and code == 1
        return
    (finding,) = findings
    assert finding["package"] == "warp-lang"
    assert [p.rsplit("/", 1)[-1] for p in finding["libraries"]] == ["warp.so"]
    assert "needs driver >= 580 (CUDA 13: its PTX is ISA 9.4" in finding["cause"]
    assert code == 1
