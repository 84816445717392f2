"""The fleet judges each distinct configuration once, keyed on the facts that decide verdicts.

Every real host has its own name, GPU UUIDs (and, from other collectors, serials and PCI bus
ids), section timings and collection time; none of them changes what a GPU can run (CUDA's rules
name the compute capability, the driver's version and the kernels a library carries). A driver
version or a library's version does. The documents are one real `archgap probe` of a venv with a
real CUDA library (libptxonly.so: compute_80 PTX only), given the GPU section nvidia-smi reports
on a T4 node (this machine has no GPU: the stand-in is the section, not the judging).
"""

from __future__ import annotations

import copy
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

import archgap.analysis.fleet as fleet
from archgap.cli import main
from archgap.report import jsondoc
from archgap.transport.fleet import host_from_facts
from tests.helpers import CUDA_BIN, install_fake_distribution, make_venv, run_cli


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    venv = tmp_path_factory.mktemp("judge-once") / "venv"
    install_fake_distribution(
        make_venv(venv), "ptxkernels", "0.1", {"ptxkernels/libptx.so": CUDA_BIN / "libptxonly.so"}
    )
    ran = run_cli("probe", "--python", str(venv / "bin" / "python"))
    assert ran.returncode == 0, ran.stderr
    facts: dict[str, Any] = json.loads(ran.stdout)["facts"]
    return facts


def _host(facts: dict[str, Any], name: str, uuid: str, **gpu_extra: str) -> dict[str, Any]:
    doc = copy.deepcopy(facts)
    doc["host"] = name
    doc["seconds"] = {k: float(len(name)) for k in doc["seconds"]}
    doc["collected_at"] = f"2026-12-0{len(name) % 9 + 1}T10:00:00Z"
    doc["sections"]["gpu"] = {
        "gpus": [{"index": 0, "name": "Tesla T4", "uuid": uuid, "compute_capability": "7.5",
                  "source": "nvidia-smi", **gpu_extra}],
        "driver_version": "580.65.06", "driver_cuda_version": "13.0",
        "source": "nvidia-smi", "problems": [],
    }  # fmt: skip
    return doc


def _judged(monkeypatch: pytest.MonkeyPatch, docs: list[dict[str, Any]]) -> tuple[Any, int]:
    """The fleet report of ``docs`` and how many times a host was judged from its facts."""
    calls = []
    real = fleet.summarise_host

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(fleet, "summarise_host", counting)
    hosts = [host_from_facts(d["host"], d) for d in docs]
    return fleet.fleet_report(hosts), len(calls)


def test_hosts_differing_only_in_identifiers_are_judged_once(
    probed: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    uuids = ("GPU-1f4c2e1a-0000-1111-2222-333344445555", "GPU-9a8b7c6d-aaaa-bbbb-cccc-dddd")
    docs = [
        _host(probed, "gpu001", uuids[0]),
        _host(probed, "gpu002", uuids[1], serial="1324020012345", pci_bus_id="00000000:3B:00.0"),
        _host(probed, "node-three", "GPU-0", serial="1324020099999", pci_bus_id="0000:D8:00.0"),
    ]
    report, judged = _judged(monkeypatch, docs)
    assert judged == 1
    assert [h.name for h in report.hosts] == ["gpu001", "gpu002", "node-three"]
    assert [h.hostname for h in report.hosts] == ["gpu001", "gpu002", "node-three"]
    # compute_80 PTX only: nothing a 7.5 GPU can run, on each host (named, not the first's name).
    for host in report.hosts:
        assert host.gaps and host.gaps[0].startswith("ptxkernels 0.1 cannot run on 7.5")
    assert len(report.groups) == 1


def test_a_deciding_fact_is_judged_on_its_own(
    probed: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _host(probed, "gpu001", "GPU-1f4c2e1a-0000-1111-2222-333344445555")
    old_driver = _host(probed, "gpu002", "GPU-9a8b7c6d-aaaa-bbbb-cccc-ddddeeeeffff")
    old_driver["sections"]["gpu"].update(driver_version="570.133.20", driver_cuda_version="12.8")
    newer = _host(probed, "gpu003", "GPU-00000000-1234-5678-9abc-def012345678")
    (dist,) = [d for d in newer["sections"]["python"]["distributions"] if d["name"] == "ptxkernels"]
    dist["version"] = "0.2"
    report, judged = _judged(monkeypatch, [base, old_driver, newer])
    assert judged == 3
    by_name = {h.name: h for h in report.hosts}
    assert by_name["gpu002"].driver == "570.133.20" and by_name["gpu001"].driver == "580.65.06"
    assert "ptxkernels==0.2" in by_name["gpu003"].packages
    assert len(report.groups) == 3


def test_hosts_of_one_configuration_share_what_was_judged(
    probed: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a fleet keeps per host is its names and collection time; the judged values (GPUs,
    # packages, coverage, gaps, JIT findings) are the configuration's, one object for all of its
    # hosts: 50,000 hosts of 80 configurations hold 80 sets of them.
    docs = [
        _host(probed, f"gpu{i:03d}", f"GPU-{i:08x}-0000-1111-2222-333344445555") for i in range(3)
    ]
    report, judged = _judged(monkeypatch, docs)
    first, *others = report.hosts
    assert judged == 1 and first.gaps
    for host in others:
        for field in ("gpus", "packages", "coverage", "gaps", "jit_findings", "toolkits"):
            assert getattr(host, field) is getattr(first, field), field


class _Stdout(io.StringIO):
    """sys.stdout that keeps each write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[int] = []

    def write(self, text: str) -> int:
        self.writes.append(len(text))
        return super().write(text)


def test_the_fleet_document_is_written_a_part_at_a_time(
    probed: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `fleet --json` over 50,000 hosts is 100 MB of JSON: built whole, its 2.8 million parts
    # and then its text held 450 MB (issue 40's limit is 500 MB). It is handed to stdout as it
    # is written (jsondoc.write), never as one string: here 400 hosts, ~23,000 parts, in
    # several writes, none of them near the whole, the same document.
    for i in range(400):
        name = f"gpu{i:03d}"
        doc = _host(probed, name, f"GPU-{i:08x}-0000-1111-2222-333344445555")
        (tmp_path / f"{name}.json").write_text(json.dumps({"command": "probe", "facts": doc}))
    stdout = _Stdout()
    monkeypatch.setattr(sys, "stdout", stdout)
    assert main(["fleet", "--from", str(tmp_path), "--stale-after", "36500d", "--json"]) == 1
    text = stdout.getvalue()
    fleet_doc = json.loads(text)
    assert fleet_doc["command"] == "fleet" and len(fleet_doc["hosts"]) == 400
    assert text == jsondoc.dumps(fleet_doc) + "\n"
    assert len(stdout.writes) >= 3 and max(stdout.writes) < len(text) / 2
