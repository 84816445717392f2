"""archgap fleet against real sshd hosts, a real one-node Slurm, and probe JSON from other engines.

Kernel verdicts follow from the nvcc command lines in tests/fixtures/cuda/build.sh:
libmix.so has SASS sm_75 ... sm_120 (runs natively on a T4, 7.5, and on 12.0);
libptxonly.so has only compute_80 PTX, which cannot serve a T4 (7.5 < 8.0): a gap there.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from archgap.report import probe as probe_report
from tests.helpers import (
    ROOT,
    good_and_old_venvs,
    json_output,
    run_cli,
)
from tests.integration.test_remote_services import closed_port, require, ssh_env

ARTIFACTS = ROOT / "tests" / ".artifacts"


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return good_and_old_venvs(tmp_path_factory.mktemp("fleetvenvs"))


def fleet(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    result = run_cli("fleet", "--json", *args, env={**ssh_env(), **(env or {})}, timeout=180)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json_output(result, "fleet")


def test_fleet_groups_identical_hosts_and_shows_drift_gaps_and_dead_hosts(
    venvs: dict[str, Path], tmp_path: Path
) -> None:
    dead = f"root@127.0.0.1:{closed_port()}"
    hostfile = tmp_path / "hosts"
    hostfile.write_text(
        f"# two identical hosts, one with old kernels, one dead\n"
        f"h01 {venvs['good']}\nh02 {venvs['good']}\nbeta {venvs['old']}\n{dead}\n"
    )
    html, prom = tmp_path / "fleet.html", tmp_path / "fleet.prom"
    code, doc = fleet("--hostfile", str(hostfile), "--gpu", "T4", "--html", str(html),
                      "--prometheus", str(prom))  # fmt: skip
    # A dead host (2) never hides a gap (1): the gap decides, and the document says so.
    assert code == doc["exit_code"] == 1
    assert [g["hosts"] for g in doc["groups"]] == [["h01", "h02"], ["beta"]]
    assert [(u["name"], u["kind"]) for u in doc["unreachable"]] == [(dead, "unreachable")]
    hosts = {h["name"]: h for h in doc["hosts"]}
    assert (
        hosts["h01"]["fingerprint"] == hosts["h02"]["fingerprint"] != hosts["beta"]["fingerprint"]
    )
    assert hosts["h01"]["gaps"] == [] and hosts["h01"]["packages"] == ["fakekernels==1.2.3"]
    assert [c["verdict"] for c in hosts["h01"]["coverage"]] == ["native"]  # sm_75 SASS
    (gap,) = hosts["beta"]["gaps"]
    assert gap.startswith("ptxkernels 0.1 cannot run on 7.5")
    # Drift: beta's group against the baseline (the largest group, h01 + h02), only what differs.
    assert doc["baseline"] == hosts["h01"]["fingerprint"]
    drift = {d["field"]: d for d in doc["drift"]}
    assert {d["group"] for d in doc["drift"]} == {hosts["beta"]["fingerprint"]}
    assert {"packages", "coverage", "env"} <= set(drift)
    assert drift["packages"]["added"] == ["ptxkernels==0.1"]
    assert drift["packages"]["removed"] == ["fakekernels==1.2.3"]
    assert doc["coverage"]["packages"] == ["fakekernels", "ptxkernels"]
    rows = {r["host"]: r["verdicts"] for r in doc["coverage"]["rows"]}
    assert rows == {"beta": ["", "none"], "h01": ["native", ""], "h02": ["native", ""]}
    # Metrics: which hosts answered (the dead one with its kind), the verdicts per host.
    families = {f.name: f.samples for f in text_string_to_metric_families(prom.read_text())}
    up = {(s.labels["host"], s.labels["kind"]): s.value for s in families["archgap_host_up"]}
    assert up == {("h01", ""): 1, ("h02", ""): 1, ("beta", ""): 1, (dead, "unreachable"): 0}
    verdicts = {(s.labels["host"], s.labels["package"], s.labels["verdict"])
                for s in families["archgap_package_verdict"]}  # fmt: skip
    assert ("beta", "ptxkernels", "none") in verdicts and (
        "h01",
        "fakekernels",
        "native",
    ) in verdicts
    assert html.read_text().startswith("<!DOCTYPE html>")
    dom = screenshot(html, "fleet-ssh")
    assert "2: h[01-02]" in dom and "1: beta" in dom  # one heat-map row per group


def test_fleet_all_good_exit_zero_and_text_report(venvs: dict[str, Path]) -> None:
    result = run_cli(
        "fleet", "--hosts", "h03,h04,h05", "--python", str(venvs["good"]), "--gpu", "12.0",
        env=ssh_env(), timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3/3 hosts answered" in result.stdout
    assert "1 group(s)" in result.stdout and "h[03-05]" in result.stdout


def test_fleet_from_files_of_other_engines(venvs: dict[str, Path], tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    # 1. archgap probe's own document, as an Ansible task would save it.
    result = run_cli("probe", "--host", "h06", "--python", str(venvs["good"]), env=ssh_env())
    assert result.returncode == 0, result.stderr
    (inbox / "h06.json").write_text(result.stdout)
    # 2. The standalone script, run by "another engine" with a plain interpreter (pdsh style).
    script = run_cli("probe", "--script", "--python", str(venvs["old"]))
    assert script.returncode == 0
    (tmp_path / "archgap-probe.py").write_text(script.stdout)
    ran = subprocess.run(
        [sys.executable, "-I", str(tmp_path / "archgap-probe.py")],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    # A directory is read for its documents (*.json, *.jsonl) only; another file is named.
    (tmp_path / "pdsh.out").write_text(f"node7: {ran.stdout.strip()}\n")
    # 3. A host that failed, as archgap probe reported it.
    failed = run_cli("probe", "--host", f"127.0.0.1:{closed_port()}", env=ssh_env())
    (inbox / "dead.json").write_text(failed.stdout)
    code, doc = fleet("--from", str(inbox), "--from", str(tmp_path / "pdsh.out"), "--gpu", "T4")
    assert code == 1  # node7 has no kernel for a T4; the dead host does not hide it
    names = sorted(h["name"] for h in doc["hosts"])
    assert names == ["h06", "node7"]
    hosts = {h["name"]: h for h in doc["hosts"]}
    assert hosts["node7"]["packages"] == ["ptxkernels==0.1"] and hosts["node7"]["gaps"]
    assert [u["kind"] for u in doc["unreachable"]] == ["unreachable"]


def test_fleet_over_slurm_one_document_per_node(venvs: dict[str, Path]) -> None:
    info = require("slurm")
    code, doc = fleet(
        "--slurm", "--python", str(venvs["good"]), "--gpu", "T4", "--", "-N1",
        env={"SLURM_CONF": info["conf"]},
    )  # fmt: skip
    assert code == 0, doc
    (host,) = doc["hosts"]
    assert host["name"] == socket.gethostname()
    assert host["packages"] == ["fakekernels==1.2.3"]


def screenshot(html: Path, name: str, size: str = "1200,900") -> str:
    """Render the page in headless Chromium; keep a screenshot under tests/.artifacts/; return
    the DOM Chromium built (in a window of that size, for a page that measures itself)."""
    chromium = require("chromium")["path"] or shutil.which("chromium")
    assert chromium, "chromium is not installed"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    png = ARTIFACTS / f"{name}.png"
    png.unlink(missing_ok=True)
    profile = html.parent / "chromium-profile"
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
    ]
    url = html.resolve().as_uri()
    dom = subprocess.run(
        [chromium, *flags, f"--window-size={size}", "--dump-dom", url], capture_output=True,
        text=True, timeout=120,
        env={**os.environ, "HOME": str(html.parent)},
    )  # fmt: skip
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'id="heatmap"' in dom.stdout
    shot = subprocess.run(
        [chromium, *flags, f"--screenshot={png}", f"--window-size={size}", url],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(html.parent)},
    )  # fmt: skip
    assert shot.returncode == 0, shot.stderr[-2000:]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    return dom.stdout


def test_fleet_finds_the_incident_only_where_it_is() -> None:
    """flashinfer 0.6.8 + nvcc 12.8 (CUDA_HOME of the h* hosts) on sm_120: the JIT rejects the GPU
    (SM 12.x requires CUDA >= 12.9); beta has 0.6.16 and CUDA_HOME at a 12.9 toolkit."""
    data = ROOT / "tests" / ".data"
    old, new = (
        data / f"venv-flashinfer-python-{v}" / "bin" / "python" for v in ("0.6.8", "0.6.16")
    )
    if not old.exists() or not new.exists():
        pytest.skip("scripts/testdata has not installed the flashinfer venvs")
    code, doc = fleet("--hosts", "h07", "--python", str(old), "--gpu", "12.0")
    assert code == 1
    (host,) = doc["hosts"]
    assert any("SM 12.x requires CUDA >= 12.9" in gap for gap in host["gaps"]), host["gaps"]
    code, doc = fleet("--hosts", "beta", "--python", str(new), "--gpu", "12.0")
    assert code == 0 and doc["hosts"][0]["gaps"] == []


def test_fleet_markdown_and_csv(venvs: dict[str, Path], tmp_path: Path) -> None:
    import csv

    from markdown_it import MarkdownIt

    from archgap import api
    from archgap.report import fleet_tables

    # Two local probes (in-process, as the CLI's), saved as pdsh-style "host: {json}" lines.
    lines = []
    for name, venv in (("n1", venvs["good"]), ("n2", venvs["old"])):
        probe = api.probe(str(venv))
        assert probe.failure is None, probe.failure
        lines.append(f"{name}: {json.dumps(probe_report.document(probe))}")
    (tmp_path / "pdsh.out").write_text("\n".join(lines) + "\n")
    run = api.fleet_run(api.FleetSource(documents=(str(tmp_path / "pdsh.out"),)), gpus=["T4"])
    assert run.report.exit_code == 1  # n2 has a gap on the T4
    header, *rows = list(csv.reader(fleet_tables.csv(run.report).splitlines()))
    assert header == ["host", "group", "gaps", "fakekernels", "ptxkernels"]
    got = {r[0]: r[3:] for r in rows}
    # build.sh: libmix.so has sm_75 SASS (native on a T4); libptxonly.so only compute_80 PTX,
    # which a 7.5 GPU cannot JIT: none.
    assert got == {"n1": ["native", ""], "n2": ["", "none"]}
    text = fleet_tables.markdown(run.report, run.elapsed)
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    assert sum(t.type == "table_open" for t in tokens) == 2
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings[0] == "archgap fleet" and "Gaps" in headings
    assert "n2: " in text.split("#### Gaps", 1)[1]
