"""The log-evidence table (kb/evidence.json) is usable as logevidence reads it: a pattern runs only
on lines containing its gate, which is compared with the lowercased line, and its value is
group 1."""

from __future__ import annotations

import pytest

from archgap.kb.evidence import EvidencePattern, evidence_patterns


@pytest.mark.parametrize("rule", evidence_patterns(), ids=lambda r: f"{r.kind}:{r.gate}")
def test_each_pattern_can_fire_and_names_its_value(rule: EvidencePattern) -> None:
    assert rule.gate and rule.gate == rule.gate.lower()  # an uppercase gate never matches
    assert rule.pattern.groups >= 1
    assert rule.source.strip()


def test_the_banners_archgap_knows_are_read() -> None:
    # Lines as nvidia-smi, nvcc and torch.utils.collect_env print them (see each entry's source).
    lines = {
        "| NVIDIA-SMI 580.65.06    Driver Version: 580.65.06    CUDA Version: 13.0     |": {
            ("driver", "580.65.06"),
            ("driver_cuda", "13.0"),
        },
        "Cuda compilation tools, release 12.8, V12.8.93": {("nvcc", "12.8")},
        "CUDA used to build PyTorch: 12.8": {("torch_cuda", "12.8")},
    }
    for line, expected in lines.items():
        found = {
            (r.kind, m.group(1))
            for r in evidence_patterns()
            if r.gate in line.lower()
            for m in r.pattern.finditer(line)
        }
        assert expected <= found, line
