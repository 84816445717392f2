"""Push model freshness: a document says when its facts were collected, and `fleet --from`
tells a node that pushed an hour ago from one whose timer stopped long ago.

Every document is a real `archgap probe` of a venv whose library has sm_75 SASS (libmix.so:
sm_75 ... sm_120), so on a T4 (7.5) nothing is a gap: the exit code is the freshness alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import CUDA_BIN, install_fake_distribution, json_output, make_venv, run_cli


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    install_fake_distribution(
        make_venv(venv), "fakekernels", "1.2.3", {"fakekernels/libmix.so": CUDA_BIN / "libmix.so"}
    )
    before = time.time()
    ran = run_cli("probe", "--python", str(venv / "bin" / "python"))
    assert ran.returncode == 0, ran.stderr
    doc: dict[str, Any] = json.loads(ran.stdout)
    # UTC, ISO 8601, to the second, taken while the probe ran.
    stamp = doc["facts"]["collected_at"]
    when = time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    assert int(before) - 1 <= when <= time.time() + 1, stamp
    return doc


def _write(inbox: Path, name: str, doc: dict[str, Any], **facts: Any) -> None:
    copy = json.loads(json.dumps(doc))
    copy["facts"].update(host=name, **facts)
    copy["facts"] = {k: v for k, v in copy["facts"].items() if v is not None}
    (inbox / f"{name}.json").write_text(json.dumps(copy))


def _ago(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds))


def test_the_standalone_script_records_its_collection_time() -> None:
    script = run_cli("probe", "--script")
    assert script.returncode == 0, script.stderr
    ran = subprocess.run([sys.executable, "-I", "-"], input=script.stdout, capture_output=True,
                         text=True, check=False, timeout=300)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    facts = json.loads(ran.stdout.strip().splitlines()[-1])
    facts = facts.get("facts", facts)
    assert time.strptime(facts["collected_at"], "%Y-%m-%dT%H:%M:%SZ")


def test_from_reads_only_documents(document: dict[str, Any], tmp_path: Path) -> None:
    """An editor's backups, a copy tool's partial file and other files beside the documents are
    not hosts; a .json document in a subdirectory and JSON Lines are."""
    inbox = tmp_path / "inbox"
    (inbox / "rack2").mkdir(parents=True)
    _write(inbox, "gpu01", document)
    _write(inbox / "rack2", "gpu02", document)
    body = (inbox / "gpu01.json").read_text()
    for name in ("gpu01.json~", "gpu01.json.bak", ".gpu03.json.tmp", "#gpu01.json#", "notes.txt"):
        (inbox / name).write_text(body)
    lines = json.loads(body)
    lines["facts"]["host"] = "gpu04"
    (inbox / "more.jsonl").write_text(json.dumps(lines) + "\n")
    result = run_cli("fleet", "--json", "--from", str(inbox), "--gpu", "T4")
    doc = json_output(result, "fleet")
    assert doc["documents"] == 3
    assert sorted(h["name"] for h in doc["hosts"]) == ["gpu01", "gpu02", "gpu04"]
    assert result.returncode == 0 and doc["unreachable"] == []


def test_stale_and_undated_documents(document: dict[str, Any], tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    _write(inbox, "gpu-live", document, collected_at=_ago(600))  # 10 minutes: fresh
    _write(inbox, "gpu-late", document, collected_at=_ago(3 * 3600 + 300))  # 3 h 5 m: stale
    _write(inbox, "gpu-undated", document, collected_at=None)  # an older archgap's document
    prom = tmp_path / "fleet.prom"
    result = run_cli("fleet", "--json", "--from", str(inbox), "--gpu", "T4",
                     "--prometheus", str(prom))  # fmt: skip
    doc = json_output(result, "fleet")
    hosts = {h["name"]: h for h in doc["hosts"]}
    assert hosts["gpu-live"]["stale"] == ""
    assert hosts["gpu-late"]["stale"].startswith(
        f"collected {hosts['gpu-late']['collected_at']}, 3h 5m ago (over 2h)"
    )
    assert hosts["gpu-undated"]["collected_at"] is None
    assert hosts["gpu-undated"]["stale"].startswith("collection time unknown")
    # No gap anywhere, but two hosts' verdicts are not live: not a clean 0.
    assert doc["gap"] is False and result.returncode == 2 and doc["exit_code"] == 2
    samples = {
        (s.name, s.labels["host"]): s.value
        for f in text_string_to_metric_families(prom.read_text())
        for s in f.samples
        if s.name in ("archgap_host_stale", "archgap_document_age_seconds")
    }
    assert samples[("archgap_host_stale", "gpu-live")] == 0
    assert samples[("archgap_host_stale", "gpu-late")] == 1
    assert samples[("archgap_host_stale", "gpu-undated")] == 1
    assert 600 <= samples[("archgap_document_age_seconds", "gpu-live")] < 3600
    assert samples[("archgap_document_age_seconds", "gpu-late")] >= 3 * 3600 + 300
    assert ("archgap_document_age_seconds", "gpu-undated") not in samples  # no time: no age

    text = run_cli("fleet", "--from", str(inbox), "--gpu", "T4", env={"COLUMNS": "200"})
    assert text.returncode == 2
    assert "3 with facts (2 stale)" in text.stdout
    stale = text.stdout.split("Stale")[1]
    assert "gpu-undated: stale collection time unknown" in stale
    assert "gpu-late: stale collected" in stale and "gpu-live" not in stale

    # A day's threshold: the 3-hour-old document is live, the undated one never is.
    longer = json_output(
        run_cli("fleet", "--json", "--from", str(inbox), "--stale-after", "1d"), "fleet"
    )
    assert [h["name"] for h in longer["hosts"] if h["stale"]] == ["gpu-undated"]
    (inbox / "gpu-undated.json").unlink()
    assert run_cli("fleet", "--from", str(inbox), "--stale-after", "1d").returncode == 0


def test_hosts_probed_now_are_never_stale(document: dict[str, Any], tmp_path: Path) -> None:
    """--stale-after is about documents read; the same facts through the API with no source of
    documents are judged live (the analysis is told no threshold)."""
    from archgap.analysis.fleet import fleet_report
    from archgap.transport.fleet import host_from_facts

    old = {**document["facts"], "collected_at": "2020-01-01T00:00:00Z"}
    report = fleet_report([host_from_facts("gpu01", old)])
    assert report.hosts[0].stale == "" and report.exit_code == 0
    report = fleet_report([host_from_facts("gpu01", old)], stale_after=7200)
    assert report.hosts[0].stale.startswith("collected 2020-01-01T00:00:00Z")


@pytest.mark.parametrize("bad", ["soon", "-1h", "0", "2w", ""])
def test_a_bad_stale_after_is_one_line(bad: str, tmp_path: Path) -> None:
    ran = run_cli("fleet", "--from", str(tmp_path), f"--stale-after={bad}")
    assert ran.returncode == 2 and "--stale-after" in ran.stderr, ran.stderr
    assert "Traceback" not in ran.stderr and len(ran.stderr.strip().splitlines()) == 1
