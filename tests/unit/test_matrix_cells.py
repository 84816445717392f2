"""analysis.matrix: which library decides a cell, the platform rule, which releases are shown.

The expectations: a package is ``partial`` when some of its kernel libraries have nothing for the
GPU (design.md, "a package's verdict rolls up its libraries'"), so that cell's evidence is such a
library, never a profiler or a device-link archive (they do not count); a wheel whose native
files are for another CPU than its file name says runs on no GPU (index/wheeltags.py); releases
are ordered by PEP 440 (10.0 after 9.0; a local label is a variant of its public version)."""

from __future__ import annotations

from archgap.analysis.matrix import Cell, deciding, on_platform, releases
from archgap.analysis.verdicts.platform import ANY_GPU, PlatformFinding
from archgap.analysis.verdicts.verdicts import KERNEL_LIBRARY, PROFILER, LibraryVerdict


def lib(path: str, verdict: str, entry: str | None, role: str = KERNEL_LIBRARY) -> LibraryVerdict:
    return LibraryVerdict(path, "H100", verdict, "why", entry, False, role)  # type: ignore[arg-type]


def test_a_partial_cell_names_a_kernel_library_without_code_for_the_gpu() -> None:
    libraries = (
        lib("w/libcupti.so", "none", None, PROFILER),
        lib("w/a.so", "native", "sm_90 SASS in .nv_fatbin"),
        lib("w/b.so", "none", None),
    )
    assert deciding("partial", libraries) == libraries[2]
    assert deciding("native", libraries) == libraries[1]
    assert deciding("none", libraries[:1]) is None  # a profiler decides nothing


def test_a_stray_wheel_blocks_every_gpu_and_keeps_its_evidence() -> None:
    cell = Cell("H100", "9.0", "native", "sm_90 SASS", "sm_90 SASS in .nv_fatbin", "k/a.so")
    stray = PlatformFinding(ANY_GPU, "x86-64", "aarch64", "the file name", "it cannot load", True)
    blocked = on_platform(cell, [stray])
    assert (blocked.verdict, blocked.reason) == ("blocked", "it cannot load")
    assert (blocked.entry, blocked.member) == (cell.entry, cell.member)
    other = PlatformFinding("GB10", "x86-64", "aarch64", "kb", "GB10 is aarch64", True)
    assert on_platform(cell, [other]) == cell  # a finding about another GPU


def test_releases_are_the_newest_public_versions() -> None:
    listed = ["3.0+cu130", "9.0", "3.0", "10.0", "3.0+cpu", "2.0"]
    assert releases(listed, 2) == ["10.0", "9.0"]
    assert releases(listed, 5) == ["10.0", "9.0", "3.0", "2.0"]
