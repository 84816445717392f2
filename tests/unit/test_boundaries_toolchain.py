"""Boundaries of the toolkit table's driver rules. Expectations from NVIDIA's CUDA release notes
(kb/toolkits.json and kb/drivers.json carry the sources):
- Table 3: CUDA 11.0 GA needs Linux driver >= 450.51.05; a runtime runs on its GA driver.
- Table 2 (minor-version compatibility): CUDA 11.x runs on driver >= 450.80.02, 12.x on
  >= 525.60.13 (with limits on PTX); below that floor and below the release's own GA minimum it
  does not run.
"""

from __future__ import annotations

import pytest

from archgap.kb.load import gpu_architectures
from archgap.kb.toolchain import driver_cuda_version, driver_runs_runtime, max_ptx_isa_for_driver


@pytest.mark.parametrize(
    ("driver", "runtime", "runs"),
    [
        ("450.51.05", "11.0", True),  # exactly 11.0's GA minimum, below the 11.x floor
        ("450.51.04", "11.0", False),  # just below both
        ("450.80.02", "11.4", True),  # exactly the 11.x floor, below 11.4's GA 470.42.01
        ("450.80.01", "11.4", False),  # just below it
        ("525.60.13", "12.8", True),  # exactly the 12.x floor
        ("525.60.12", "12.8", False),
    ],
)
def test_a_runtime_on_a_driver_at_and_below_its_minimums(
    driver: str, runtime: str, runs: bool
) -> None:
    assert driver_runs_runtime(driver, runtime)[0] is runs


def test_the_ga_minimum_is_named_when_it_decides() -> None:
    runs, why = driver_runs_runtime("450.51.05", "11.0")
    assert runs is True and why == "driver 450.51.05 >= 450.51.05 (CUDA 11.0 GA minimum)"


# `--driver 570` names a branch ("an R570 driver"). NVIDIA's Table 3 puts CUDA 12.8 GA's minimum
# at 570.26 and 12.8 Update 1's at 570.124.06, both inside R570, and 13.0 GA's at 580.65.06; the
# PTX ISA table gives CUDA 12.8 ISA 8.7 and 12.9 ISA 8.8. So an R570 driver runs CUDA 12.8 and
# JITs PTX ISA 8.7, and no R570 or R575 driver runs CUDA 13.
@pytest.mark.parametrize(
    ("driver", "runtime", "runs"),
    [
        ("570", "12.8", True),  # the branch: past 570.26 and 570.124.06
        ("575", "12.9", True),
        ("575", "13.0", False),  # below R580
        ("580", "13.0", True),
        ("570.25", "12.8", True),  # a release below 12.8's GA minimum: minor-version rule
    ],
)
def test_a_lone_branch_stands_for_its_releases(driver: str, runtime: str, runs: bool) -> None:
    assert driver_runs_runtime(driver, runtime)[0] is runs


@pytest.mark.parametrize(
    ("driver", "cuda", "isa"),
    [
        ("570", "12.8", "8.7"),
        ("570.26", "12.8", "8.7"),
        ("570.25", "12.6", "8.5"),
        ("560", "12.6", "8.5"),
    ],
)
def test_a_branch_jits_what_its_cuda_does(driver: str, cuda: str, isa: str) -> None:
    assert driver_cuda_version(driver) == cuda
    assert max_ptx_isa_for_driver(driver) == isa


@pytest.mark.parametrize(
    ("driver", "gap"),
    [
        ("570", None),
        ("570.26", None),
        ("560", "first"),
        ("570.25", "first"),
        ("535.104.05", "first"),
    ],
)
def test_blackwell_runs_on_r570_and_not_before(driver: str, gap: str | None) -> None:
    """Blackwell came with CUDA 12.8 (sm_100, sm_120), whose GA driver minimum is 570.26."""
    (blackwell,) = [a for a in gpu_architectures() if "12.0" in a.compute_capabilities]
    found = blackwell.driver_gap(driver)
    assert (found[0] if found else None) == gap
    if found:
        assert found[1].startswith(f"driver {driver} is older than Blackwell's first driver 570.26")
