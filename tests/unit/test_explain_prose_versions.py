"""Versions a report states in prose: the CUDA toolkit a person names ("My cuda version is 11.0",
"cuda11.7", "CUDA version: 11.8") is the toolkit; the "CUDA Version" nvidia-smi prints beside
"Driver Version" is the highest CUDA the driver supports (nvidia-smi's banner), never the
toolkit. Expectations are the words of each line."""

from __future__ import annotations

import pytest

from archgap.analysis.explain.logparse import parse_log
from archgap.analysis.explain.rules.facts import log_facts
from tests.unit.test_gates import GATES, _explained, _printed

ERROR = "\nRuntimeError: CUDA error: no kernel image is available for execution on the device"


@pytest.mark.parametrize(
    ("line", "toolkit"),
    [
        ("My cuda version is 11.0", "11.0"),
        ("I installed cuda11.7 and the matching torch", "11.7"),
        ("CUDA version: 11.8", "11.8"),
        ("my CUDA is 12.1", "12.1"),
        ("Environment: cuda = 12.4", "12.4"),
    ],
)
def test_a_toolkit_stated_in_prose_is_the_toolkit(line: str, toolkit: str) -> None:
    assert log_facts(parse_log(line + ERROR), ()).toolkit == toolkit


@pytest.mark.parametrize(
    "banner",
    [
        "| NVIDIA-SMI 550.54.14    Driver Version: 550.54.14    CUDA Version: 12.4     |",
        "NVIDIA-SMI 550.54.14 Driver Version: 550.54.14 CUDA Version: 12.4",  # pasted flat
    ],
)
def test_nvidia_smi_cuda_version_is_the_drivers(banner: str) -> None:
    facts = log_facts(parse_log(banner + ERROR), ())
    assert facts.toolkit is None
    assert facts.driver == "550.54.14"


def test_a_prose_toolkit_decides_a_build_scripts_toolkit_check() -> None:
    # mamba-ssm 2.2.4 setup.py:170 needs nvcc >= 11.6; the report says its CUDA is 11.4
    gate = GATES["mamba-ssm-setup-cuda"]
    diagnosis = _explained("My cuda version is 11.4\n" + _printed(gate, "8.0", "11.6"))
    assert diagnosis.signature == gate.signature_id
    assert "CUDA 11.4" in diagnosis.root_cause and "toolkit >= 11.6" in diagnosis.root_cause
