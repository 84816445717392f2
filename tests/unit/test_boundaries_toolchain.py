"""Boundaries of the toolkit table's driver rules. Expectations from NVIDIA's CUDA release notes
(kb/toolkits.json and kb/drivers.json carry the sources):
- Table 3: CUDA 11.0 GA needs Linux driver >= 450.51.05; a runtime runs on its GA driver.
- Table 2 (minor-version compatibility): CUDA 11.x runs on driver >= 450.80.02, 12.x on
  >= 525.60.13 (with limits on PTX); below that floor and below the release's own GA minimum it
  does not run.
"""

from __future__ import annotations

import pytest

from archgap.kb.toolchain import driver_runs_runtime


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
