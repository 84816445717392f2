"""warp-lang 1.19.0 (issue 38's hand-worked cells): the package and its run-time compiler on
T4, A100, RTX 4090, H100, B200, RTX PRO 6000 and V100 with drivers 535, 570 and 580, each cell
worked out by hand (tests/.data/venv-warp-lang-1.19.0, installed --no-deps: numpy is absent).

What the files hold (cuobjdump 13.5, tests/.data/venv-cuobjdump, run by hand):
``warp/bin/warp.so`` ``--list-elf``: 13 modules each of sm_75, sm_80, sm_86, sm_89, sm_90,
sm_100, sm_120; ``--list-ptx``: 13 each of compute_75 and compute_121, ``.version 9.4``; its
read-only data: "Cuda compilation tools, release 13.4" (103 times, its static runtime and NVRTC)
and NVRTC's '-arch=compute_75' ... 'compute_121' list; DT_NEEDED: libc, libm, libdl, librt,
libpthread only (the CUDA 13.4 runtime and NVRTC are linked in).

Rules:
- SASS sm_XY runs on compute capability X.Z with Z >= Y, never across majors (CUDA C++
  Programming Guide, "Application Compatibility"); compute capabilities from NVIDIA's CUDA GPUs
  page. So each GPU's own SASS serves it (RTX 4090: sm_89), and V100 (7.0) has nothing: no SASS
  of major 7 at or below 7.0, and compute_75 PTX needs >= 7.5.
- A CUDA 13.x runtime needs a driver >= 580 (CUDA 13 release notes, Table 2; minor-version
  compatibility's floor), so 535 and 570 run nothing of it. Warp says the same itself:
  context.py (1.19.0) sets min_driver_version to (13, 0) for a CUDA 13 build and registers no
  CUDA device when the driver's CUDA version is lower (lines 8711-8735): its NVRTC compiles
  nothing that runs. Blackwell's first driver is 570.26 (CUDA 12.8's), so on 535 the B200 and
  the RTX PRO 6000 run nothing either way.
- Warp's import needs numpy (warp/_src/types.py:31, module level), which is not installed: the
  package cannot be imported (ModuleNotFoundError), so where it has kernels it is ``blocked``,
  and ``none`` stays ``none`` (V100).
- Warp compiles kernels with its NVRTC 13.4 for the device's own architecture (cubin when the
  driver's CUDA is older than 13.4, as 580.65.06's 13.0 is; context.py get_cuda_output_format,
  lines 6386-6394): ``ok`` on every GPU from 7.5 with a 580 driver; V100 fails (NVRTC 13 has no
  target below compute_75).

At 75c8efa the JIT rows were ``ok`` on 535 and 570 (the driver was not asked).

The same library as a wheel member (298 MB, streamed: NVRTC's marks are kept, and the bytes at
its '-arch=compute_' strings and banners) is CUDA 13 by its PTX ISA 9.4 (CUDA 13.4's), so on 570
the package is blocked and its compiler fails as installed; on 580 its compiler is ``ok`` from
7.5, as installed, and the package (its numpy is pip's to install) is native where it has SASS.
At eb60471 that 580 row was ``unknown``: the streamed read kept no table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import json_output, member_wheel, need_data, run_cli

GPUS = ("T4", "A100", "RTX 4090", "H100", "B200", "RTX PRO 6000", "V100")
OWN_SASS = {"T4": 75, "A100": 80, "RTX 4090": 89, "H100": 90, "B200": 100, "RTX PRO 6000": 120}
DRIVERS = ("535.104.05", "570.124.06", "580.65.06")


def scan(driver: str) -> dict[str, Any]:
    (venv,) = need_data("venv-warp-lang-1.19.0")
    python = str(Path(venv) / "bin" / "python")
    result = run_cli("scan", "--python", python, "--gpu", ",".join(GPUS), "--driver", driver,
                     "--json", "--no-config")  # fmt: skip
    return json_output(result, "scan")


@pytest.fixture(scope="module")
def docs() -> dict[str, dict[str, Any]]:
    return {driver: scan(driver) for driver in DRIVERS}


def expected_package(gpu: str) -> str:
    return "none" if gpu not in OWN_SASS else "blocked"  # numpy missing wherever it has kernels


def expected_jit(gpu: str, driver: str) -> str:
    if gpu == "V100" or driver != "580.65.06":
        return "fails"
    return "ok"


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_package_on_each_gpu(docs: dict[str, dict[str, Any]], driver: str) -> None:
    rows = {p["gpu"]: p for p in docs[driver]["packages"] if p["package"] == "warp-lang"}
    assert {g: r["verdict"] for g, r in rows.items()} == {g: expected_package(g) for g in GPUS}
    for gpu, sm in OWN_SASS.items():  # what serves it, from the listing above
        (lib,) = rows[gpu]["libraries"]
        assert lib["deciding_entry"].startswith(f"sm_{sm} SASS"), (gpu, lib["deciding_entry"])
        if driver == "535.104.05" and gpu in ("B200", "RTX PRO 6000"):
            assert "older than Blackwell's first driver" in lib["reason"]
        elif driver == "580.65.06":
            assert "numpy" in lib["reason"]
        else:
            assert "needs driver >= 580" in lib["reason"] and "numpy" in lib["reason"]


@pytest.mark.parametrize("driver", DRIVERS)
def test_its_compiler_on_each_gpu(docs: dict[str, dict[str, Any]], driver: str) -> None:
    rows = {j["gpu"]: j for j in docs[driver]["jit"] if j["package"] == "warp-lang"}
    assert {g: r["status"] for g, r in rows.items()} == {g: expected_jit(g, driver) for g in GPUS}
    if driver == "570.124.06":
        assert "CUDA 13 code" in rows["A100"]["cause"] and driver in rows["A100"]["cause"]
    if driver == "535.104.05":
        assert "older than Blackwell's first driver" in rows["B200"]["cause"]
    if driver == "580.65.06":
        assert "compiles for sm_89 itself" in rows["RTX 4090"]["cause"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    (venv,) = need_data("venv-warp-lang-1.19.0")
    (site,) = Path(venv).glob("lib/python*/site-packages")
    made = tmp_path_factory.mktemp("wheel") / "warp_lang-1.19.0-py3-none-manylinux_2_28_x86_64.whl"
    member_wheel(site, "warp/bin/warp.so", "warp_lang-1.19.0.dist-info", made)
    return made


def scan_wheel(wheel: Path, driver: str) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    result = run_cli("scan", str(wheel), "--gpu", ",".join(GPUS), "--driver", driver,
                     "--json", "--no-config")  # fmt: skip
    doc = json_output(result, "scan")
    packages = {p["gpu"]: p["verdict"] for p in doc["packages"] if p["package"] == "warp-lang"}
    return packages, {j["gpu"]: j for j in doc["jit"] if j["package"] == "warp-lang"}


def test_the_wheel_on_a_570_driver(wheel: Path) -> None:
    packages, rows = scan_wheel(wheel, "570.124.06")
    assert packages == {g: expected_package(g) for g in GPUS}
    assert {g: r["status"] for g, r in rows.items()} == {g: "fails" for g in GPUS}
    # as installed: its NVRTC's banner says 13.4 (at eb60471: "CUDA 13 (its PTX is ISA 9.4")
    assert "NVRTC 13.4 makes CUDA 13 code" in rows["A100"]["cause"]
    assert "570.124.06" in rows["A100"]["cause"]


def test_the_wheel_on_a_580_driver_compiles_as_installed(wheel: Path) -> None:
    packages, rows = scan_wheel(wheel, "580.65.06")
    assert packages == {g: "native" if g in OWN_SASS else "none" for g in GPUS}
    assert {g: r["status"] for g, r in rows.items()} == {
        g: expected_jit(g, "580.65.06") for g in GPUS
    }
    assert "NVRTC 13.4 compiles for sm_89 itself" in rows["RTX 4090"]["cause"]  # the banner's
