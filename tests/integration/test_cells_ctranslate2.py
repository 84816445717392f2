"""ctranslate2 4.8.5 (issue 38's hand-worked cells), from its real Linux wheel before install
(tests/.data/wheels-dlopen) on T4, A100, RTX 4090, H100, B200, RTX PRO 6000 and V100 with drivers
535, 570 and 580, each cell worked out by hand.

What the file holds (ctranslate2.libs/libctranslate2-a7a60d30.so.4.8.5, cuobjdump 13.5 by hand
on the installed copy): ``--list-elf`` 34 modules each of sm_53, sm_60, sm_61, sm_70, sm_75,
sm_80, sm_86; ``--list-ptx`` 34 of compute_86, ``.version 8.7`` (PTX ISA 8.7: CUDA 12.8's);
DT_NEEDED: no CUDA library (its CUDA 12 runtime is linked in); 'libcublas.so.12' and dlopen in
its symbols and read-only data (CTranslate2's cublas_stub.cc opens cuBLAS on first use).

Rules:
- SASS sm_XY runs on compute capability X.Z with Z >= Y, never across majors; PTX compute_XY is
  JIT-compiled for any CC >= X.Y if the driver knows its ISA (CUDA C++ Programming Guide,
  "Application Compatibility"). T4 sm_75, A100 sm_80, RTX 4090 sm_86 (8.6 <= 8.9), V100 sm_70:
  native. H100 (9.0), B200 (10.0), RTX PRO 6000 (12.0): no SASS of their major, compute_86 PTX:
  jit, where the driver knows ISA 8.7: 570 (CUDA 12.8) and 580 do, 535 (CUDA 12.2: up to 8.2)
  does not (blocked: 'the provided PTX was compiled with an unsupported toolchain').
- A CUDA 12.x runtime runs on any driver >= 525.60.13 (minor-version compatibility, Table 2);
  Blackwell's first driver is 570.26 (CUDA 12.8's): on 535 the B200 and RTX PRO 6000 run
  nothing (blocked).
- cuBLAS 12 comes from outside the wheel (its METADATA requires numpy and pyyaml only): before
  install nobody can say whether the target's loader finds it, so the dlopen is said, as
  'unknown', and the kernels decide the verdicts.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import json_output, need_data, run_cli

GPUS = ("T4", "A100", "RTX 4090", "H100", "B200", "RTX PRO 6000", "V100")
OWN_SASS = {"T4": 75, "A100": 80, "RTX 4090": 86, "V100": 70}
DRIVERS = ("535.104.05", "570.124.06", "580.65.06")


def scan(driver: str) -> dict[str, Any]:
    (folder,) = need_data("wheels-dlopen")
    (wheel,) = folder.glob("ctranslate2-4.8.5-cp311-*manylinux*.whl")
    result = run_cli("scan", str(wheel), "--gpu", ",".join(GPUS), "--driver", driver, "--json",
                     "--no-config")  # fmt: skip
    return json_output(result, "scan")


def expected(gpu: str, driver: str) -> str:
    if gpu in OWN_SASS:
        return "native"
    return "blocked" if driver == "535.104.05" else "jit"


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_wheel_on_each_gpu(driver: str) -> None:
    doc = scan(driver)
    rows = {p["gpu"]: p for p in doc["packages"] if p["package"] == "ctranslate2"}
    assert {g: r["verdict"] for g, r in rows.items()} == {g: expected(g, driver) for g in GPUS}
    for gpu, sm in OWN_SASS.items():
        (lib,) = rows[gpu]["libraries"]
        assert lib["deciding_entry"].startswith(f"sm_{sm} SASS"), (gpu, lib["deciding_entry"])
    (lib,) = rows["H100"]["libraries"]
    assert lib["deciding_entry"].startswith("compute_86 PTX (ISA 8.7)")
    if driver == "535.104.05":
        assert "up to ISA 8.2" in rows["H100"]["reason"]
    cublas = [c for c in doc["load"] if "libcublas.so.12" in c["cause"]]
    assert [c["status"] for c in cublas] == ["unknown"]
