"""spconv-cu120 2.3.6 and cumm-cu120 0.6.3 (issue 38's hand-worked cells), judged from their
real wheels before install (tests/.data/wheels-spconv) on T4, A100, RTX 4090, H100, B200,
RTX PRO 6000 and V100 with drivers 535, 570 and 580, each cell worked out by hand.

What the files hold:
- spconv/core_cc.cpython-311-x86_64-linux-gnu.so (314 MB): its .nv_fatbin, walked container by
  container as docs/reference/fatbin-format.md describes (by hand: cuobjdump 13.5 stops on it
  with "Invalid ELF" after the first containers), holds 606 containers: SASS sm_50 (133),
  sm_52 (328), sm_60 (411), sm_61 (133), sm_70, sm_75, sm_80, sm_86, sm_89, sm_90 (411 each) and
  PTX compute_52 (195) and compute_90 (411), all ``.version 8.0`` (PTX ISA 8.0: CUDA 12.0's).
  DT_NEEDED: libcudart-5a077122.so.12.0.107, bundled in spconv_cu120.libs (RPATH
  $ORIGIN/../spconv_cu120.libs): the CUDA 12.0 runtime.
- cumm/core_cc...so has no device code; cumm_cu120.libs/libnvrtc-d7c32a86.so.12.0.140 is NVRTC
  12.0 ('Cuda compilation tools, release 12.0'; its '-arch=compute_50' ... 'compute_90' list;
  'nvrtc: error: invalid value for --gpu-architecture (-arch)').

Rules:
- SASS sm_XY runs on compute capability X.Z with Z >= Y, never across majors; PTX compute_XY is
  JIT-compiled for any CC >= X.Y if the driver knows its ISA (CUDA C++ Programming Guide,
  "Application Compatibility"). So T4 sm_75, A100 sm_80, RTX 4090 sm_89, H100 sm_90 and V100
  sm_70 are native; B200 (10.0) and RTX PRO 6000 (12.0) have no SASS of their major and get
  compute_90 PTX: jit. PTX ISA 8.0 is known to 535 (CUDA 12.2: up to 8.2), 570 and 580.
- The CUDA 12.0 runtime runs on any driver >= 525.60.13 (minor-version compatibility, CUDA
  release notes Table 2): 535, 570 and 580 all run it. Blackwell's first driver is 570.26
  (CUDA 12.8's): on 535 the B200 and the RTX PRO 6000 run nothing (blocked).
- cumm compiles with its NVRTC for the device's own architecture only (cumm 0.6.3
  cumm/nvrtc/__init__.py:239-240: '--gpu-architecture=sm_{major}{minor}' of
  tv.get_compute_capability(), no PTX fallback); spconv 2.3.6 does so for kernels its prebuilt
  set lacks (spconv/algo.py:347-362). NVRTC 12.0 has sm_70 ... sm_90 and nothing of 10.0 or
  12.0: ok on T4, A100, RTX 4090, H100, V100; fails on B200 and the RTX PRO 6000 (and on 535 the
  driver runs nothing there). cumm itself carries no kernels.

Before cd575a8 cumm's rows were 'unknown' (no model of how it picks its target).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import json_output, need_data, run_cli

GPUS = ("T4", "A100", "RTX 4090", "H100", "B200", "RTX PRO 6000", "V100")
OWN_SASS = {"T4": 75, "A100": 80, "RTX 4090": 89, "H100": 90, "V100": 70}
BLACKWELL = ("B200", "RTX PRO 6000")
DRIVERS = ("535.104.05", "570.124.06", "580.65.06")


def scan(driver: str) -> dict[str, Any]:
    (folder,) = need_data("wheels-spconv")
    wheels = sorted(str(w) for w in folder.glob("*.whl"))
    assert len(wheels) == 2
    result = run_cli("scan", *wheels, "--gpu", ",".join(GPUS), "--driver", driver, "--json",
                     "--no-config")  # fmt: skip
    return json_output(result, "scan")


@pytest.fixture(scope="module")
def docs() -> dict[str, dict[str, Any]]:
    return {driver: scan(driver) for driver in DRIVERS}


def expected_spconv(gpu: str, driver: str) -> str:
    if gpu in OWN_SASS:
        return "native"
    return "blocked" if driver == "535.104.05" else "jit"


def expected_cumm(gpu: str) -> str:
    return "fails" if gpu in BLACKWELL else "ok"


@pytest.mark.parametrize("driver", DRIVERS)
def test_spconv_on_each_gpu(docs: dict[str, dict[str, Any]], driver: str) -> None:
    rows = {p["gpu"]: p for p in docs[driver]["packages"] if p["package"] == "spconv-cu120"}
    assert {g: r["verdict"] for g, r in rows.items()} == {
        g: expected_spconv(g, driver) for g in GPUS
    }
    for gpu, sm in OWN_SASS.items():
        (lib,) = [x for x in rows[gpu]["libraries"] if "core_cc" in x["path"]]
        assert lib["deciding_entry"].startswith(f"sm_{sm} SASS"), (gpu, lib["deciding_entry"])
    for gpu in BLACKWELL:
        (lib,) = [x for x in rows[gpu]["libraries"] if "core_cc" in x["path"]]
        assert lib["deciding_entry"].startswith("compute_90 PTX (ISA 8.0)"), lib["deciding_entry"]


@pytest.mark.parametrize("driver", DRIVERS)
def test_cumms_compiler_on_each_gpu(docs: dict[str, dict[str, Any]], driver: str) -> None:
    doc = docs[driver]
    rows = {j["gpu"]: j for j in doc["jit"] if j["package"] == "cumm-cu120"}
    assert {g: r["status"] for g, r in rows.items()} == {g: expected_cumm(g) for g in GPUS}
    assert "NVRTC 12.0" in rows["H100"]["cause"] and "sm_90" in rows["H100"]["cause"]
    if driver == "535.104.05":
        assert "older than Blackwell's first driver" in rows["B200"]["cause"]
    else:
        assert "invalid value for --gpu-architecture" in rows["B200"]["cause"]
        assert "sm_120" in rows["RTX PRO 6000"]["cause"]
    cumm = {p["verdict"] for p in doc["packages"] if p["package"] == "cumm-cu120"}
    assert cumm == {"no-kernels"}
