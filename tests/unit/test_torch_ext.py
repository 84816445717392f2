"""TORCH_CUDA_ARCH_LIST as torch 2.14.1's cpp_extension reads it (tables read from the installed
file: tests/fixtures/torch/cpp_extension_2.14.1.py.txt is its lines 2676-2700), against nvcc's
target table (CUDA 13.0 dropped compute_70) and the compatibility rules (12.0a runs only on 12.0;
GB10 is 12.1)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from archgap.analysis.jit.compilers import jit_findings
from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.probe.environment.torchbuild import torch_supported_arches as _torch_supported_arches
from archgap.probe.facts import EnvVar, TorchBuild
from tests.unit.test_jit_rules import facts

EXCERPT = Path(__file__).resolve().parents[1] / "fixtures" / "torch" / "cpp_extension_2.14.1.py.txt"


def torch_2141(tmp_path: Path) -> TorchBuild:
    utils = tmp_path / "torch" / "utils"
    utils.mkdir(parents=True)
    shutil.copy(EXCERPT, utils / "cpp_extension.py")
    arches, named, path = _torch_supported_arches(str(tmp_path))
    return TorchBuild(
        "2.14.1+cu130", "13.0", str(tmp_path / "torch/version.py"), arches, path, named
    )


def torch_findings(tmp_path: Path, arch_list: str, gpu: str, nvcc: str = "13.0") -> list:  # type: ignore[type-arg]
    env = (EnvVar("TORCH_CUDA_ARCH_LIST", arch_list, "svc.env"),)
    f = replace(facts(flashinfer=None, nvcc=nvcc, extra_env=env), torch=torch_2141(tmp_path))
    return [x for x in jit_findings(f, [resolve_gpu(gpu)]) if x.package.startswith("torch")]


def test_the_installed_tables_are_read(tmp_path: Path) -> None:
    build = torch_2141(tmp_path)
    assert build.supported_arches is not None
    assert {"10.3", "10.7", "11.0"} <= set(build.supported_arches)
    assert "10.1" not in build.supported_arches
    assert build.named_arches is not None
    assert dict(build.named_arches)["Blackwell"] == "10.0;10.3;12.0;12.1+PTX"


def test_named_architectures_are_valid(tmp_path: Path) -> None:
    # Hopper -> 9.0+PTX, Blackwell -> 10.0;10.3;12.0;12.1+PTX: GB10 gets sm_121 SASS
    assert torch_findings(tmp_path, "8.0;Hopper;Blackwell", "GB10") == []


def test_compute_70_with_nvcc_13_and_120a_on_gb10(tmp_path: Path) -> None:
    got = torch_findings(tmp_path, "7.0;12.0a", "GB10")
    by_error = {f.error: f for f in got}
    build = by_error["nvcc fatal   : Unsupported gpu architecture 'compute_70'"]
    assert build.status == "fails"
    assert any("CUDA <= 12.9" in fix.action for fix in build.fixes)
    kernel = by_error["CUDA error: no kernel image is available for execution on the device"]
    assert kernel.gpu == "GB10" and kernel.gates_exit_code
    assert [fix.action.split(" (")[0] for fix in kernel.fixes] == [
        'add "12.1" to TORCH_CUDA_ARCH_LIST'
    ]


def test_unknown_entry_is_still_rejected(tmp_path: Path) -> None:
    (finding,) = torch_findings(tmp_path, "9.0;12.0f", "H100")
    assert finding.error == "ValueError: Unknown CUDA arch (12.0f) or GPU not supported"
    assert finding.status == "fails"
