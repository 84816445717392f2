"""Fuzzing bounded by work: a fixed number of mutated real binaries and fleet documents (the long
campaign is bench/fuzz_campaign.py). No exception, no impossible row, no failed report."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from archgap.analysis.fleet import fleet_report
from archgap.probe.__main__ import run as probe_run
from archgap.probe.binary.fatbin import read_binary
from archgap.transport.fleet import host_from_facts
from tests.fuzzing import BIN, binary_case, binary_violations, fleet_case, sources

SEED = 17
BINARY_CASES = 600
FLEET_CASES = 60


def test_mutated_real_binaries(tmp_path: Path) -> None:
    originals = sources()
    path = tmp_path / "case"
    failures: list[str] = []
    for index in range(BINARY_CASES):
        name, data, deep = binary_case(SEED, index, originals)
        path.write_bytes(data)
        facts = read_binary(str(path), deep=deep)
        failures += [f"{index} {name}: {v}" for v in binary_violations(facts, len(data))]
    assert failures == []


@pytest.fixture(scope="module")
def facts_document() -> dict[str, Any]:
    request = {"gpu": {}, "python": {"python": sys.executable}, "binaries": {"paths": [str(BIN)]}}
    facts: dict[str, Any] = json.loads(json.dumps(probe_run({"request": request})))
    assert facts["sections"]["binaries"] and facts["sections"]["python"]["distributions"]
    return facts


def test_mutated_fleet_documents(facts_document: dict[str, Any]) -> None:
    for index in range(FLEET_CASES):
        bad = fleet_case(SEED, index, facts_document)
        hosts = [host_from_facts("good", facts_document), host_from_facts("bad", bad)]
        report = fleet_report(hosts, ("T4",))
        names = [s.name for s in report.hosts] + [u.name for u in report.unreachable]
        assert sorted(names) == ["bad", "good"], index
        assert "good" in [s.name for s in report.hosts], index
