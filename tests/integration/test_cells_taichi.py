"""taichi 1.7.4 (issue 38's hand-worked cells): its run-time compiler on T4, A100, RTX 4090,
H100, B200, RTX PRO 6000 and V100 with drivers 535, 570 and 580, each cell worked out by hand
(tests/.data/venv-taichi-1.7.4, installed --no-deps).

What the files hold: no device code at all (cuobjdump 13.5 on taichi_python.so and
libtaichi_c_api.so: "does not contain device code"); their DT_NEEDED name no CUDA library (libm,
libz, libX11, libc); 'libcuda.so' in read-only data (the driver API, opened at run time); LLVM's
NVPTX backend linked in: the triple nvptx64-nvidia-cuda, processors 'Target SM 2.0' ...
'Target SM 8.6' and PTX ISAs 'Use PTX version 3.2' ... '7.5' (strings, by hand).

Rules:
- taichi caps the target at sm_86 (taichi/rhi/cuda/cuda_context.cpp: 'if (compute_capability_ >
  86) compute_capability_ = 86;') and loads the PTX it makes with cuModuleLoadDataEx
  (jit_cuda.cpp): the driver JIT-compiles PTX for any GPU of compute capability >= its target
  (CUDA C++ Programming Guide, "Application Compatibility"), if the driver knows its PTX ISA.
  7.5 is CUDA 11.5's ISA; 535 (CUDA 12.2) knows up to 8.2. So T4, A100 and V100 get their own
  target (sm_75, sm_80, sm_70 are among the backend's), and RTX 4090, H100, B200 and RTX PRO 6000
  get compute_86 PTX JIT-compiled by the driver: ``ok``.
- taichi calls only the driver API, so no CUDA runtime sets a driver floor; but a driver older
  than an architecture's first one runs nothing on it: Blackwell's first is 570.26 (CUDA
  12.8's), so on 535 the B200 and the RTX PRO 6000 ``fail``.

At 75c8efa the Blackwell rows on 535 were ``ok`` (the driver's GPU range was not asked).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import json_output, need_data, run_cli

GPUS = ("T4", "A100", "RTX 4090", "H100", "B200", "RTX PRO 6000", "V100")
OWN_TARGET = {"T4": 75, "A100": 80, "V100": 70}  # at or below sm_86: the backend's own
BLACKWELL = ("B200", "RTX PRO 6000")
DRIVERS = ("535.104.05", "570.124.06", "580.65.06")


def scan(driver: str) -> dict[str, Any]:
    (venv,) = need_data("venv-taichi-1.7.4")
    python = str(Path(venv) / "bin" / "python")
    result = run_cli("scan", "--python", python, "--gpu", ",".join(GPUS), "--driver", driver,
                     "--json", "--no-config")  # fmt: skip
    return json_output(result, "scan")


def expected(gpu: str, driver: str) -> str:
    return "fails" if driver == "535.104.05" and gpu in BLACKWELL else "ok"


@pytest.mark.parametrize("driver", DRIVERS)
def test_its_compiler_on_each_gpu(driver: str) -> None:
    rows = {j["gpu"]: j for j in scan(driver)["jit"] if j["package"] == "taichi"}
    assert {g: r["status"] for g, r in rows.items()} == {g: expected(g, driver) for g in GPUS}
    for gpu, sm in OWN_TARGET.items():
        assert f"compiles for sm_{sm} itself" in rows[gpu]["cause"]
    for gpu in ("RTX 4090", "H100", *BLACKWELL):
        if rows[gpu]["status"] == "ok":
            assert "compute_86" in rows[gpu]["cause"], rows[gpu]["cause"]
        else:
            assert "older than Blackwell's first driver 570.26" in rows[gpu]["cause"]
