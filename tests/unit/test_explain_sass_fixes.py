"""A "no kernel image" fix names only SASS that runs on the GPU.

NVIDIA's rule (CUDA C++ Programming Guide, Binary Compatibility: "binary compatibility between
Tegra and desktop is not supported"): sm_XY SASS runs on X.Z with Z >= Y, never between an
integrated (Tegra) GPU and a desktop one: Xavier's sm_72 does not run on a 7.5 (T4), Orin's
sm_87 not on an 8.9 (RTX 4090)."""

from __future__ import annotations

import re

import pytest

from archgap.analysis.explain.diagnosis import explain
from archgap.analysis.explain.logparse import parse_log
from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.kb.signatures import load_signatures

NO_KERNEL = "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"


@pytest.mark.parametrize(
    ("gpu", "tegra", "own"), [("RTX 4090", "sm_87", "sm_89"), ("T4", "sm_72", "sm_75")]
)
def test_a_desktop_gpu_is_not_offered_a_tegra_minor(gpu: str, tegra: str, own: str) -> None:
    d = explain(parse_log(NO_KERNEL), load_signatures(), None, (resolve_gpu(gpu),))
    fixes = " | ".join(f.text for f in d.fixes)
    assert re.search(rf"\b{own}\b", fixes)
    assert tegra not in fixes
