"""verify's comparison, pure: the driver's answer (a "verify" section) beside the scan's verdict.

The sections here are hand-written in the probe's shape; the binaries are the real fixtures.
"""

from __future__ import annotations

from typing import Any

from archgap.analysis.verify import compare, driver_ptx_isa
from archgap.probe.binary.fatbin import read_binary
from archgap.probe.facts import PythonEnvironment
from archgap.report.verify import bug_report
from tests.helpers import CUDA_BIN

NO_ENV = PythonEnvironment("", "", (), (), ())
PTX_ONLY = str(CUDA_BIN / "libptxonly.so")


def section(outcome: str, **gpu: Any) -> dict[str, Any]:
    row = {"path": PTX_ONLY, "outcome": outcome, "reason": "", "attempts": [], "failures": []}
    device = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}
    return {
        "library": "libcuda.so.1",
        "driver_version": 13000,
        "gpus": [{**device, "status": "ok", "error": None, "seconds": 0.1, **gpu,
                  "libraries": [row]}],
    }  # fmt: skip


def test_the_scan_rule_for_the_driver_ptx_isa() -> None:
    # scan takes the kernel driver's version (nvidia-smi/NVML) when known: 570.x meets CUDA
    # 12.8's minimum (570.26) but not 12.9's, so ISA 8.7; without it, cuDriverGetVersion's CUDA.
    assert driver_ptx_isa("570.86.10", "13.0") == "8.7"
    assert driver_ptx_isa(None, "13.0") == "9.0"
    assert driver_ptx_isa(None, None) is None


def test_the_prediction_follows_the_kernel_drivers_version() -> None:
    binaries = [read_binary(PTX_ONLY)]  # compute_80 PTX, ISA 9.0 (nvcc 13.0)
    # The driver API says CUDA 13.0 and JIT-compiled it; nvidia-smi said 570.86.10 (ISA 8.7):
    # the scan predicts "none", so the run shows a rules disagreement to file.
    report = compare(section("jit"), binaries, NO_ENV, driver_version="570.86.10")
    (check,) = report.checks
    assert (check.predicted, check.observed) == ("none", "jit")
    (bug,) = report.disagreements
    driver = "- driver: CUDA 13.0 (cuDriverGetVersion), driver 570.86.10; PTX ISA assumed by the"
    assert f"{driver} scan: 8.7\n" in bug_report(bug, report)
    assert compare(section("jit"), binaries, NO_ENV).disagreements == ()


def test_an_unsettled_result_counts_neither_way() -> None:
    report = compare(section("unknown", status="timed out"), [read_binary(PTX_ONLY)], NO_ENV)
    (check,) = report.checks
    assert not check.settled and check.load_failure
    assert (report.agreements, len(report.settled), report.disagreements) == (0, 0, ())


def test_a_kernel_less_stub_settles_nothing() -> None:
    # libstub.so (build.sh: a device link without kernels) loads, but has no kernel: the scan's
    # "no-kernels" is no prediction the driver's answer can confirm or contradict.
    stub = str(CUDA_BIN / "libstub.so")
    data = section("native")
    data["gpus"][0]["libraries"][0]["path"] = stub
    report = compare(data, [read_binary(stub)], NO_ENV)
    (check,) = report.checks
    assert check.predicted == "no-kernels" and not check.settled
    assert report.disagreements == ()


def test_the_exit_code_as_documented() -> None:
    # `archgap verify`'s docstring: 0 agreement; 1 a disagreement, a hung GPU, or a library named
    # on the command line that did not load; 2 no GPU or driver.
    ptx = [read_binary(PTX_ONLY)]  # compute_80 PTX: the H100 (9.0) JIT-compiles it
    assert compare(section("jit"), ptx, NO_ENV).exit_code(named=True) == 0
    assert compare(section("jit"), ptx, NO_ENV, driver_version="570.86.10").exit_code(False) == 1
    hung = compare(section("unknown", status="timed out"), ptx, NO_ENV)
    assert (hung.exit_code(named=False), hung.exit_code(named=True)) == (1, 1)
    # Nothing loaded from the kernel-less stub (no prediction to disagree with): a failure only
    # when the library was named.
    stub = str(CUDA_BIN / "libstub.so")
    data = section("none")
    data["gpus"][0]["libraries"][0]["path"] = stub
    refused = compare(data, [read_binary(stub)], NO_ENV)
    assert refused.disagreements == () and refused.checks[0].load_failure
    assert (refused.exit_code(named=False), refused.exit_code(named=True)) == (0, 1)
    no_gpu = {
        "library": "libcuda.so.1",
        "error": "cuInit failed: no CUDA-capable device",
        "gpus": [],
    }
    assert compare(no_gpu, ptx, NO_ENV).exit_code(named=True) == 2
