"""``kernels`` and ``versions`` take their exit code from their typed result (``exit_code``),
like scan, probe and recipe, so a script calling the API reads the number the CLI exits with
(issue 44 item 3). The numbers are README's "Exit codes": 0 nothing missing, 1 a gap (a
``--require`` gate fails; no version covers the GPUs), 2 nothing could be judged (an unreadable
file; no variant judged)."""

from __future__ import annotations

from pathlib import Path

from archgap import api
from archgap.analysis.versions import GpuVerdict, VersionsReport, VersionVerdict
from tests.helpers import CUDA_BIN, run_cli

# Built by tests/fixtures/cuda/build.sh with nvcc asked for SASS sm_80 only (MANIFEST.tsv).
SM80_ONLY = str(CUDA_BIN / "libdebug.so")


def test_kernels_gate_passes_where_the_sass_runs_and_fails_across_a_major() -> None:
    # SASS sm_80 runs on compute capability 8.x with minor >= 0: an A100 (8.0), an A10 (8.6).
    assert api.kernels([SM80_ONLY], require=["A100"]).exit_code == 0
    assert api.kernels([SM80_ONLY], require=["8.6"]).exit_code == 0
    # Never across majors, and there is no PTX to JIT: an H100 (9.0) has nothing to run.
    assert api.kernels([SM80_ONLY], require=["H100"]).exit_code == 1
    # Without --require there is no gate: listing device code is never a gap.
    assert api.kernels([SM80_ONLY]).exit_code == 0


def test_kernels_a_missing_file_is_exit_2_even_beside_a_failing_gate(tmp_path: Path) -> None:
    missing = f"{tmp_path}/nothing-here.so"
    assert api.kernels([SM80_ONLY, missing]).exit_code == 2
    assert api.kernels([SM80_ONLY, missing], require=["H100"]).exit_code == 2


def test_the_cli_exits_with_the_results_code() -> None:
    for gpu in ("A100", "H100"):
        done = run_cli("kernels", SM80_ONLY, "--require", gpu, "--json")
        assert done.returncode == api.kernels([SM80_ONLY], require=[gpu]).exit_code, done.stderr
    assert run_cli("kernels", SM80_ONLY, "--require", "H100").returncode == 1


def _version(version: str, verdict: str, covers: bool) -> VersionVerdict:
    judged = (GpuVerdict("H100", "9.0", verdict, "its kernels"),) if verdict else ()
    return VersionVerdict(
        version, "https://pypi.org/simple", f"pkg-{version}.whl", "", judged, covers
    )


def _versions(*versions: VersionVerdict, winner: bool = False) -> VersionsReport:
    first = next((v for v in versions if v.covers), None) if winner else None
    return VersionsReport(
        "pkg", (), ("https://pypi.org/simple",), "3.11", None, False, versions, len(versions),
        first, None,
    )  # fmt: skip


def test_versions_exit_0_with_a_winner_1_when_judged_without_2_when_nothing_judged() -> None:
    native, none = _version("2.0", "native", True), _version("1.0", "none", False)
    assert _versions(native, none, winner=True).exit_code == 0
    # Every variant read, none covers the GPU: a gap.
    assert _versions(none).exit_code == 1
    # A wheel that could not be read (no verdicts) or only 'unknown': nothing was decided.
    assert _versions(_version("1.0", "", False)).exit_code == 2
    assert _versions(_version("1.0", "unknown", False)).exit_code == 2
    assert _versions().exit_code == 2
