"""What a constraints file can exclude (analysis.versions.exclusions), on hand-made verdicts.

The oracle for what a specifier matches is PEP 440 as `packaging` (PyPA's reference
implementation, the code pip vendors) applies it: `!=3.0` excludes 3.0 and every 3.0+local,
`!=3.0+cu130` only 3.0+cu130; a specifier names no index and no file.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.analysis.versions import (
    GpuVerdict,
    VersionsReport,
    VersionVerdict,
    exclusions,
)
from archgap.report.versions import constraints

MAIN, EXTRA = "https://main.example/simple", "https://extra.example/simple"
T4 = resolve_gpu("T4")


def variant(
    version: str, verdict: str, index: str = MAIN, problem: str | None = None
) -> VersionVerdict:
    wheel = f"demo-{version}-py3-none-any.whl"
    verdicts = () if problem else (GpuVerdict("T4", "7.5", verdict, f"{verdict} on 7.5"),)
    good = verdict in ("native", "jit", "partial") and problem is None
    return VersionVerdict(version, index, wheel, f"{index}/{wheel}", verdicts, good, problem)


def report(*versions: VersionVerdict, strict: bool = False) -> VersionsReport:
    winner = next((v for v in versions if v.covers), None)
    return VersionsReport("demo", (T4,), (MAIN, EXTRA), None, None, strict, versions,
                          len(versions), winner, None)  # fmt: skip


def test_packaging_matches_as_the_constraints_assume() -> None:
    assert not SpecifierSet("!=3.0").contains("3.0+cu130")
    assert SpecifierSet("!=3.0+cu130").contains("3.0")
    assert not SpecifierSet("!=3.0+cu130").contains("3.0+cu130")
    assert SpecifierSet("!=3.0+cu130,!=3.0+cpu").contains("3.0")


def test_each_failing_version_excluded_and_undecided_ones_left() -> None:
    """none, blocked and no-kernels exclude; unknown (nothing decided) and an unread wheel do
    not: excluding them would be a guess."""
    found = exclusions(report(
        variant("5.0", "unknown"), variant("4.1", "blocked"), variant("4.0", "no-kernels"),
        variant("3.5", "none", problem="truncated zip"), variant("3.0", "none"),
        variant("1.0", "native"),
    ))  # fmt: skip
    assert [(e.version, e.excluded) for e in found] == [("4.1", True), ("4.0", True), ("3.0", True)]


def test_a_public_version_with_a_covering_local_variant_is_kept() -> None:
    """3.0+cu130 covers; main's 3.0 does not, but `!=3.0` would also exclude 3.0+cu130."""
    found = exclusions(report(variant("3.0+cu130", "native", EXTRA), variant("3.0", "none")))
    (only,) = found
    assert (only.version, only.excluded) == ("3.0", False)
    assert "would also exclude 3.0+cu130" in only.why
    text = constraints(report(variant("3.0+cu130", "native", EXTRA), variant("3.0", "none")), False)
    assert [line for line in text.splitlines() if not line.startswith("#")] == []
    assert "# kept demo 3.0: " in text


def test_one_version_on_two_indexes_with_other_bytes_is_kept() -> None:
    found = exclusions(report(variant("2.0", "none", MAIN), variant("2.0", "native", EXTRA)))
    (only,) = found
    assert not only.excluded and "cannot tell the two apart" in only.why
    both = exclusions(report(variant("2.0", "none", MAIN), variant("2.0", "blocked", EXTRA)))
    assert [(e.version, e.excluded) for e in both] == [("2.0", True)]


def test_strict_excludes_partial() -> None:
    assert exclusions(report(variant("2.0", "partial"), variant("1.0", "native"))) == ()
    (only,) = exclusions(report(variant("2.0", "partial"), variant("1.0", "native"), strict=True))
    assert (only.version, only.excluded) == ("2.0", True)


def test_the_file_is_what_pip_reads() -> None:
    """One `NAME!=VERSION` per excluded version, its reason after two spaces and a '#' (a
    comment in a requirements file starts at a '#' preceded by whitespace), every other line a
    comment; what it excludes is what the analysis said."""
    text = constraints(report(variant("3.0+cu130", "none", EXTRA), variant("3.0", "none"),
                              variant("1.0", "native")), False)  # fmt: skip
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == [
        "demo!=3.0+cu130  # demo-3.0+cu130-py3-none-any.whl: T4 (7.5) none: none on 7.5",
        "demo!=3.0  # demo-3.0-py3-none-any.whl: T4 (7.5) none: none on 7.5",
    ]
    allowed = SpecifierSet(",".join(line.split("  #")[0].removeprefix("demo") for line in lines))
    assert [v for v in ("3.0+cu130", "3.0", "1.0") if allowed.contains(v)] == ["1.0"]
