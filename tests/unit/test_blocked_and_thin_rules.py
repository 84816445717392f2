"""The rules of ``blocked`` and of a thin share of modules, on hand-made kernel facts.

blocked: a library with kernels for the GPU that cannot load there (the load model's broken link);
none: nothing for the GPU, whatever else is missing. A package none of whose libraries runs is
blocked when one of them only cannot load: installing the piece makes it run (at worst partial,
the others being arch-specific extras). Thin: the modules serving a GPU against an even share.
"""

from dataclasses import replace

from archgap.analysis.fleet import VERDICT_ORDER
from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.analysis.verdicts.load import LoadModel
from archgap.analysis.verdicts.verdicts import (
    RANK,
    LibraryVerdict,
    PackageBinaries,
    PackageVerdict,
    library_verdict,
    verdicts_for,
)
from archgap.kb.roles import thin_coverage
from archgap.probe.facts import BinaryFacts
from archgap.report.html import COLOURS, COLUMN_RANK, LEGEND
from archgap.report.table import VERDICT_STYLE
from tests.unit.test_verdicts import entry, lib

A100 = resolve_gpu("A100")  # 8.0
SM80 = lib("/sp/pkg/libsm80.so", entry("sm_80"))  # runs on 8.0
SM90 = lib("/sp/pkg/libsm90.so", entry("sm_90"))  # nothing for 8.0 (SASS never runs on older)
DRIVER = "needs driver >= 580 (CUDA 13), and driver 570.124.06 does not run CUDA 13"


def _judge(
    *binaries: BinaryFacts, blocked: dict[tuple[str, str], str]
) -> tuple[PackageVerdict, dict[str, LibraryVerdict]]:
    group = PackageBinaries("pkg", "1.0", binaries)
    (package,) = verdicts_for([group], [A100], None, LoadModel(blocked=blocked))
    return package, {lib.path.rsplit("/", 1)[-1]: lib for lib in package.libraries}


def test_kernels_that_cannot_load_are_blocked_and_no_kernels_stay_none() -> None:
    both = {(SM80.path, ""): DRIVER, (SM90.path, ""): DRIVER}
    package, libs = _judge(SM80, SM90, blocked=both)
    sm80, sm90 = libs["libsm80.so"], libs["libsm90.so"]
    assert sm80.verdict == "blocked" and sm80.load == DRIVER
    # sm_90 SASS has nothing for 8.0: a newer driver would not change that (another build)
    assert sm90.verdict == "none" and "cannot load either" in sm90.reason
    # installing the driver makes libsm80 run: the package is blocked, not none
    assert package.verdict == "blocked"
    assert "nothing for 8.0 in libsm90.so either" in package.reason


def test_a_package_with_nothing_for_the_gpu_is_none_even_when_blocked_too() -> None:
    package, _ = _judge(SM90, blocked={(SM90.path, ""): DRIVER})
    assert package.verdict == "none"


def test_a_package_where_one_library_runs_and_one_cannot_load_is_partial() -> None:
    other = replace(SM80, path="/sp/pkg/libother.so")
    package, _ = _judge(SM80, other, blocked={(other.path, ""): DRIVER})
    assert package.verdict == "partial"
    assert "1 of 2 libraries cannot load" in package.reason


def _fat(per_target: int, sm75: int) -> BinaryFacts:
    """A library with ``per_target`` modules for each of sm_80..sm_120 and ``sm75`` for sm_75."""
    rows = [replace(entry(t), count=per_target) for t in ("sm_80", "sm_86", "sm_90", "sm_120")]
    return lib("/sp/pkg/libfat.so", replace(entry("sm_75"), count=sm75), *rows)


def test_thin_coverage_is_a_tenth_of_an_even_share() -> None:
    t4 = resolve_gpu("T4")  # 7.5: only sm_75 SASS runs there
    assert thin_coverage().min_share == 0.1
    # 5 targets, 400 + 1 modules: an even share is 80.2, a tenth 8.02 -> 1 module is thin
    thin = library_verdict(_fat(100, 1), t4)
    assert thin.verdict == "partial"
    assert thin.reason.startswith("only 1 of 401 modules serve 7.5 (1 sm_75;")
    # 9 of 409 (share 81.8, a tenth 8.18): not a tiny fraction
    assert library_verdict(_fat(100, 9), t4).verdict == "native"
    # ten modules a target or fewer: one module is never below a tenth of an even share
    assert library_verdict(_fat(10, 1), t4).verdict == "native"
    # and the GPUs the library is built for are native
    assert library_verdict(_fat(100, 1), A100).verdict == "native"


def test_one_worst_first_order_everywhere() -> None:
    assert list(RANK) == ["none", "blocked", "unknown", "partial", "jit", "native", "no-kernels"]
    assert VERDICT_ORDER == RANK  # the fleet's worst verdict per package
    assert (
        set(RANK) <= set(COLOURS) and set(RANK) <= set(LEGEND) and set(RANK) <= set(VERDICT_STYLE)
    )
    # the heat map's columns: gaps first (none, blocked, partial), then doubts
    assert COLUMN_RANK["blocked"] == COLUMN_RANK["none"] < COLUMN_RANK["unknown"]
