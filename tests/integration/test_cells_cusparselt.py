"""nvidia-cusparselt-cu13 0.10.0 (issue 38's hand-worked cells), from its real wheel
(tests/.data/wheels-cusparselt) on T4, A100, RTX 4090, H100, B200, RTX PRO 6000 and V100 with
drivers 535, 570 and 580, each cell worked out by hand.

What the file holds (nvidia/cu13/lib/libcusparseLt.so.0; its .nv_fatbin walked by hand, as
docs/reference/fatbin-format.md describes, the same as cuobjdump 13.5 --list-elf/--list-ptx):
1,128 cubins: sm_75 (1), sm_80 (41), sm_86 (40), sm_87 (52), sm_89 (54), sm_90 (2), sm_90a (114),
sm_100 (594), sm_103 (62), sm_110 (2), sm_120 (88), sm_120f (58), sm_121 (20); PTX compute_75
(2), compute_80 (40), compute_86, compute_89, compute_90, compute_100, compute_110, compute_120
(2 each) of ``.version`` 9.2 and 9.4 (CUDA 13.2's and 13.4's ISAs); "Cuda compilation tools,
release 13.4" in its data; DT_NEEDED: the C library's alone (its runtime linked in). Its
.cask_resource (data its own loader reads; cuobjdump does not list it) holds 268 more cubins
by the same walk: sm_100 (3), sm_100a (48), sm_100f (159), sm_103 (3), sm_103a (16), sm_120 (3),
sm_120a (4), sm_120f (25), sm_121 (3), sm_121a (4): 1,450 modules, 3 of them for 7.5.

Rules:
- SASS sm_XY runs on compute capability X.Z with Z >= Y, never across majors; 'a' SASS only on
  exactly X.Y (CUDA C++ Programming Guide). Own SASS: A100 sm_80, RTX 4090 sm_89, H100 sm_90
  and sm_90a, B200 sm_100, RTX PRO 6000 sm_120: native. V100 (7.0): nothing (sm_75 and
  compute_75 are above 7.0; CUDA 13 dropped Volta): none.
- T4 (7.5): one sm_75 cubin of 1,128, and NVIDIA's support matrix (its METADATA, "Supported SM
  Architectures": SM 8.0, 8.6, 8.7, 8.9, 9.0, 10.0, 10.3, 11.0, 12.0, 12.1) leaves 7.5 out:
  issue 38 asks 'partial' with the counts for a library that covers a GPU with a tiny fraction
  of its modules.
- A CUDA 13.x library needs a driver >= 580 (CUDA 13 release notes, Table 2): on 535 and 570 it
  cannot load wherever it has kernels (blocked), and V100 stays none. On 580.65.06 (CUDA 13.0)
  its SASS runs by minor-version compatibility (its PTX ISA 9.4 the driver could not JIT, but
  every GPU here that it serves has SASS).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import json_output, need_data, run_cli

GPUS = ("T4", "A100", "RTX 4090", "H100", "B200", "RTX PRO 6000", "V100")
DRIVERS = ("535.104.05", "570.124.06", "580.65.06")


def scan(driver: str) -> dict[str, Any]:
    (folder,) = need_data("wheels-cusparselt")
    (wheel,) = folder.glob("nvidia_cusparselt_cu13-0.10.0-*.whl")
    result = run_cli("scan", str(wheel), "--gpu", ",".join(GPUS), "--driver", driver, "--json",
                     "--no-config")  # fmt: skip
    return json_output(result, "scan")


def expected(gpu: str, driver: str) -> str:
    if gpu == "V100":
        return "none"
    if driver != "580.65.06":
        return "blocked"
    return "partial" if gpu == "T4" else "native"


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_library_on_each_gpu(driver: str) -> None:
    doc = scan(driver)
    rows = {p["gpu"]: p for p in doc["packages"] if p["package"] == "nvidia-cusparselt-cu13"}
    assert {g: r["verdict"] for g, r in rows.items()} == {g: expected(g, driver) for g in GPUS}
    if driver == "580.65.06":
        assert "only 3 of 1,450 modules serve 7.5 (1 sm_75, 2 compute_75" in rows["T4"]["reason"]
    else:
        assert "needs driver >= 580" in rows["A100"]["libraries"][0]["reason"]
