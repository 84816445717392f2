"""`kernels --require claimed` and `--require GPU` judge a thin library alike (issue 38 item 5's
loose end): `partial` fails only with --strict, the rule of every gate (scan, --require GPU).

The library: cuSPARSELt 0.10.0 (nvidia-cusparselt-cu13, the real wheel). NVIDIA's support matrix
(its PyPI page, "Support SM arch") lists SM 8.0 and up, not 7.5; its listed fatbin still holds one
sm_75 cubin among 1,128 (cuobjdump --list-elf, checked in test_blocked_and_thin.py) and two
compute_75 PTX: it serves a T4 (7.5) with a tiny share of its modules, `partial`. A build that
claims 7.5 (TORCH_CUDA_ARCH_LIST="7.5": torch's cpp_extension reads it as
-gencode=arch=compute_75,code=sm_75) is judged on the GPU that claim names, as `--require 7.5`.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.helpers import json_output, need_data, run_cli


def _cusparselt() -> Path:
    (folder,) = need_data("wheels-cusparselt")
    (wheel,) = folder.glob("nvidia_cusparselt_cu13-0.10.0-*.whl")
    return wheel


def gate(wheel: Path, require: str, *extra: str) -> tuple[int, list[tuple[str, str]]]:
    env = {**os.environ, "TORCH_CUDA_ARCH_LIST": "7.5"}
    result = run_cli("kernels", str(wheel), "--require", require, *extra, "--json", env=env)
    assert "Traceback" not in result.stderr, result.stderr
    failures = json_output(result, "kernels")["require"]["failures"]
    return result.returncode, [(f["verdict"], f["gpu"]) for f in failures]


def test_a_thin_library_passes_the_claimed_gate_as_the_gpu_gate_unless_strict() -> None:
    wheel = _cusparselt()
    assert gate(wheel, "T4") == (0, [])
    assert gate(wheel, "claimed") == (0, [])  # the claim of 7.5, judged as --require 7.5
    code, failures = gate(wheel, "T4", "--strict")
    assert code == 1 and failures == [("partial", "T4")]
    code, failures = gate(wheel, "claimed", "--strict")
    assert code == 1 and [verdict for verdict, _ in failures] == ["partial"]
