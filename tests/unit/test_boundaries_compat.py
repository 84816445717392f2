"""Boundaries of the compatibility rules and the toolkit/driver table: at, just below, just above.

Expectations from NVIDIA's documents, not from archgap's output:
- CUDA C++ Programming Guide (binary compatibility): SASS ``sm_XY`` runs on compute capability
  X.Z for Z >= Y, never on another major; ``sm_XYa`` only on X.Y; ``sm_XYf`` on the members of its
  family from X.Y (CUDA 12.9 release notes: 100f runs on 10.0/10.3, 103f on 10.3, 120f on
  12.0/12.1); PTX ``compute_XY`` is JIT-compiled for any capability >= X.Y; arch-specific and
  family PTX is not forward compatible.
- CUDA Toolkit release notes, Table 3 (minimum Linux driver per GA release): 12.8 needs 570.26,
  12.9 575.51.03, 13.0 580.65.06; Table 2 (minor-version compatibility): CUDA 13.x runs on
  driver >= 580, 12.x on >= 525.60.13.
- nvcc's targets per release: sm_120 from CUDA 12.8, sm_121 and the ``f`` targets from 12.9;
  CUDA 13.0 dropped sm_50-sm_72 (sm_70's last toolkit is 12.9).
"""

from __future__ import annotations

import pytest

from archgap.analysis.verdicts.compat import ComputeCapability, ptx_jits_on, sass_compat
from archgap.kb import toolchain as tk


def cc(text: str) -> ComputeCapability:
    parsed = ComputeCapability.parse(text)
    assert parsed is not None
    return parsed


@pytest.mark.parametrize(
    ("arch", "variant", "gpu", "runs"),
    [
        (120, "", "12.0", True),  # its own capability
        (120, "", "12.1", True),  # a newer minor of the same major
        (121, "", "12.0", False),  # an older minor
        (90, "", "10.0", False),  # never across majors
        (90, "a", "9.0", True),
        (100, "a", "10.3", False),  # arch-specific: exactly its own
        (103, "f", "10.3", True),  # a family from its own member
        (103, "f", "10.0", False),  # 10.0 is below 103f's first member
        (120, "f", "12.1", True),
        (100, "f", "12.0", False),  # another family
        (80, "", "8.7", False),  # Orin (Tegra) runs only its own sm_87
        (87, "", "8.9", False),  # and a Tegra cubin runs on no desktop GPU
    ],
)
def test_sass(arch: int, variant: str, gpu: str, runs: bool) -> None:
    assert sass_compat(arch, variant, cc(gpu)).runs is runs


@pytest.mark.parametrize(
    ("gpu", "runs"), [("15.0", True), ("15.2", True), ("14.9", False), ("16.0", False)]
)
def test_a_family_no_table_knows_is_its_major_from_its_minor(gpu: str, runs: bool) -> None:
    # compat.py: a family target newer than the table (sm_150f) is assumed to be its own major,
    # from its minor upwards, as every family NVIDIA has published is.
    assert sass_compat(150, "f", cc(gpu)).runs is runs


@pytest.mark.parametrize(
    ("arch", "variant", "gpu", "jits"),
    [
        (80, "", "8.0", True),  # PTX on exactly its capability
        (80, "", "12.0", True),  # and on every later one
        (80, "", "7.5", False),
        (100, "f", "10.3", True),  # family PTX: its family only
        (100, "f", "12.0", False),
        (90, "a", "10.0", False),
    ],
)
def test_ptx(arch: int, variant: str, gpu: str, jits: bool) -> None:
    assert ptx_jits_on(arch, variant, cc(gpu)) is jits


@pytest.mark.parametrize(
    ("driver", "cuda"),
    [
        ("570.26", "12.8"),  # exactly 12.8's minimum
        ("570.25", "12.6"),  # one below: the release before
        ("575.51.03", "12.9"),
        ("580.65.06", "13.0"),
        ("580.65.05", "12.9"),
    ],
)
def test_the_newest_cuda_a_driver_runs(driver: str, cuda: str) -> None:
    assert tk.driver_cuda_version(driver) == cuda


@pytest.mark.parametrize(
    ("driver", "runtime", "runs"),
    [
        ("570.26", "12.8", True),  # the GA minimum itself
        ("580", "13.0", True),  # minor-version compatibility's floor for 13.x, exactly
        ("579.99", "13.0", False),
        ("525.60.13", "12.8", True),  # 12.x's floor, exactly
        ("525.60.12", "12.8", False),
    ],
)
def test_a_runtime_on_a_driver(driver: str, runtime: str, runs: bool) -> None:
    assert tk.driver_runs_runtime(driver, runtime)[0] is runs


@pytest.mark.parametrize(
    ("cuda", "target", "knows"),
    [
        ("12.8", "sm_120", True),  # the release that added it
        ("12.6", "sm_120", False),
        ("12.8", "sm_121", False),
        ("12.9", "sm_121", True),
        ("12.9", "sm_120f", True),
        ("12.9", "sm_70", True),  # the last release before the drop
        ("13.0", "sm_70", False),  # the release that dropped it
        ("8.0", "sm_50", True),  # the table's first release knows its own targets
    ],
)
def test_what_a_toolkit_builds(cuda: str, target: str, knows: bool) -> None:
    assert tk.toolkit_can_target(cuda, target) is knows


def test_a_targets_first_and_last_toolkit() -> None:
    assert tk.toolkit_range_for("sm_120") == ("12.8", None)
    assert tk.toolkit_range_for("sm_70") == ("9.0", "12.9")
    assert tk.toolkit_range_for("sm_72") == ("9.1", "12.9")


@pytest.mark.parametrize(
    ("version", "inside"),
    [("0.6.8", True), ("0.6.7", False), ("0.6.99", True), ("0.7.0", False), ("0.7.1", False)],
)
def test_a_version_range_includes_its_start_and_excludes_its_end(
    version: str, inside: bool
) -> None:
    assert tk.version_in_range(version, "0.6.8", "0.7.0") is inside
