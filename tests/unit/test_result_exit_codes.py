"""Each command's exit code is its typed result's (``exit_code``), so the API and MCP read the
same number the CLI exits with (issue 44 item 3). The numbers are the CLI's documented ones
(README, "Exit codes"): 0 what was asked holds, 1 a gap, 2 nothing could be judged."""

from __future__ import annotations

from dataclasses import replace

import pytest

from archgap.analysis.scan import ScanReport
from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.analysis.verdicts.verdicts import PackageVerdict, Verdict
from archgap.api import recipe
from archgap.probe.facts import GpuFacts, PythonEnvironment
from archgap.results import ProbeResult
from archgap.transport.run import TransportFailure


def _scan(verdict: Verdict, role: str = "named") -> ScanReport:
    gpu = replace(resolve_gpu("H100"), role=role)
    package = PackageVerdict("pkg", "1", gpu.label, verdict, "its libraries ...", ())
    env = PythonEnvironment("/py", "3.11", ("/sp",), (), ())
    return ScanReport(env, GpuFacts((), None, None, "none"), (gpu,), (), (package,))


def test_scan_fails_only_on_a_gating_gpu() -> None:
    # 'none': no code in the package runs on the GPU (README: a gap, exit 1); 'native': SASS.
    assert _scan("none").exit_code == 1
    assert _scan("none", role="present").exit_code == 1
    assert _scan("native").exit_code == 0
    # A GPU that is neither present nor named (the default matrix) is shown, never gates.
    assert _scan("none", role="matrix").exit_code == 0


def test_probe_no_facts_is_an_error_and_a_missing_gpu_a_gap() -> None:
    failure = TransportFailure("unreachable", "ssh: connect to host gpu1 port 22: refused")
    assert ProbeResult("gpu1", "ssh", None, failure=failure).exit_code == 2
    # No facts outranks the GPU that could not be looked for.
    assert ProbeResult("gpu1", "ssh", None, failure, ("9.0",), ("9.0",)).exit_code == 2
    assert ProbeResult("local", "local", None, required=("9.0",), missing=("9.0",)).exit_code == 1
    assert ProbeResult("local", "local", None, required=("9.0",)).exit_code == 0


@pytest.mark.parametrize(
    ("gpus", "toolkit", "code"),
    [
        # CUDA 11.8 added sm_90 (Hopper): SASS for both GPUs, each runs natively.
        (["H100", "A100"], "11.8", 0),
        # CUDA 11.7's newest target is sm_87: the H100 gets PTX only (JIT), not native code.
        (["H100"], "11.7", 1),
        # CUDA 12.8 added sm_120: with 12.6 an RTX 5090 (12.0) has no native target.
        (["RTX 5090"], "12.6", 1),
    ],
)
def test_recipe_is_complete_only_with_native_code_for_every_gpu(
    gpus: list[str], toolkit: str, code: int
) -> None:
    assert recipe(gpus, toolkit=toolkit).exit_code == code
