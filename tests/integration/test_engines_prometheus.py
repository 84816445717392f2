"""Prometheus: the alert rules shipped in deploy/prometheus checked by promtool (`check rules`,
and `test rules` on the unit-test file beside them), `promtool check metrics` on the textfiles
archgap writes, and the rules evaluated by promtool on those real files' samples.

Textfile rules (node_exporter's textfile collector): every sample of the file becomes a series of
the node's scrape, labelled with its `instance`; the rules must name metrics archgap writes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import CUDA_BIN, ROOT, install_fake_distribution, make_venv, run_cli

RULES = ROOT / "deploy" / "prometheus" / "archgap-rules.yml"
RULE_TESTS = RULES.with_name("archgap-rules.test.yml")


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is not installed (Debian's prometheus package; scripts/services)"
    return found


def _promtool(tool: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    run = subprocess.run
    return run([tool, *args], capture_output=True, text=True, input=stdin, timeout=60, check=False)


def test_shipped_rules_check_and_their_unit_tests_pass(promtool: str) -> None:
    checked = _promtool(promtool, "check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 5 rules found" in checked.stdout
    tested = _promtool(promtool, "test", "rules", str(RULE_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def _textfiles(tmp_path: Path) -> dict[str, str]:
    """Real textfiles: a node with a gap (libptxonly.so has only compute_80 PTX, so nothing for
    a T4, 7.5), a node whose interpreter is missing, and a fleet read from pushed documents:
    this node's, one that timed out, one written in 2020 (older than --stale-after's 2 h) and
    one from an archgap that did not record when it was collected."""
    venv = tmp_path / "venv"
    install_fake_distribution(
        make_venv(venv), "ptxkernels", "0.1", {"ptxkernels/libptx.so": CUDA_BIN / "libptxonly.so"}
    )
    python = str(venv / "bin" / "python")
    files = {}
    for name, interpreter in (("gpu-gap", python), ("gpu-broken", "/nonexistent/python")):
        prom = tmp_path / f"{name}.prom"
        run_cli("scan", "--python", interpreter, "--gpu", "T4", "--prometheus", str(prom))
        files[name] = prom.read_text()
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    assert run_cli("probe", "--python", python, "--out", str(inbox)).returncode == 0
    (fresh,) = inbox.glob("*.json")
    down = {"command": "probe", "target": "gpu-down", "error": {"kind": "timeout", "message": "-"}}
    (inbox / "gpu-down.json").write_text(json.dumps(down))
    doc = json.loads(fresh.read_text())
    assert doc["facts"]["collected_at"].endswith("Z")
    doc["facts"].update(host="gpu-old", collected_at="2020-01-01T00:00:00Z")
    (inbox / "gpu-old.json").write_text(json.dumps(doc))
    doc["facts"]["host"] = "gpu-undated"
    del doc["facts"]["collected_at"]
    (inbox / "gpu-undated.json").write_text(json.dumps(doc))
    prom = tmp_path / "fleet.prom"
    run_cli("fleet", "--from", str(inbox), "--gpu", "T4", "--prometheus", str(prom))
    files["login"] = prom.read_text()
    return files


def test_rules_fire_on_the_textfiles_archgap_writes(promtool: str, tmp_path: Path) -> None:
    files = _textfiles(tmp_path)
    series = []
    for instance, text in files.items():
        checked = _promtool(promtool, "check", "metrics", stdin=text)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = {**sample.labels, "instance": instance}
                inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
                values = f"{sample.value:g}x60"  # the same value for an hour
                series.append({"series": f"{sample.name}{{{inner}}}", "values": values})
    # Every metric the rules name is one archgap writes.
    written = {s["series"].split("{")[0] for s in series}
    named = set(re.findall(r"\barchgap_[a-z_]+", RULES.read_text()))
    assert named and named <= written, named - written

    host = os.uname().nodename  # the name the probe recorded in this node's document
    python = str(tmp_path / "venv" / "bin" / "python")  # the environment judged
    env = {"environment": python}
    gap = "Run `archgap scan` there for the packages, the GPU and the fix."
    broken = (
        "`archgap scan --health` there prints the reason (no-python, probe-failed, gpu-fault...)."
    )

    def alert(labels: dict[str, str], summary: str, description: str = "") -> dict[str, object]:
        annotations = {"summary": summary, **({"description": description} if description else {})}
        return {"exp_labels": {"severity": "warning", **labels}, "exp_annotations": annotations}

    stale = (
        "Its document is older than --stale-after or has no collection time; "
        "`archgap fleet --from` lists it under Stale with when it was collected."
    )
    checks = [
        # One package without a kernel for the T4: one gap, on the node and on each fleet host
        # (the stale ones' last known gap too), each in the environment judged.
        ("20m", "ArchgapGap", [
            alert({"instance": "gpu-gap", **env},
                  f"archgap: 1 CUDA architecture gap(s) on gpu-gap ({python})", gap),
            *(alert({"instance": "login", "host": name, **env},
                    f"archgap: 1 CUDA architecture gap(s) on {name} ({python})", gap)
              for name in sorted(("gpu-old", "gpu-undated", host)))]),
        # Nothing judged where the interpreter is missing: a scan failure, not "no gap".
        ("40m", "ArchgapScanFailing", [
            alert({"instance": "gpu-broken", "environment": "/nonexistent/python"},
                  "archgap: the scan on gpu-broken could not judge the node "
                  "(/nonexistent/python)", broken)]),
        ("40m", "ArchgapHostNotProbed", [
            alert({"instance": "login", "host": "gpu-down", "kind": "timeout"},
                  "archgap: gpu-down was not probed (timeout)")]),
        # Written in 2020, and undated: stale; this node's own document (just written) is not.
        ("40m", "ArchgapHostStale", [
            alert({"instance": "login", "host": name, **env},
                  f"archgap: the facts of {name} are stale", stale)
            for name in ("gpu-old", "gpu-undated")]),
    ]  # fmt: skip
    tests = {"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series, "alert_rule_test": [
            {"eval_time": at, "alertname": name, "exp_alerts": exp} for at, name, exp in checks
        ]}]}  # fmt: skip
    test_file = tmp_path / "real.test.yml"
    test_file.write_text(yaml.safe_dump(tests, sort_keys=False))
    tested = _promtool(promtool, "test", "rules", str(test_file))
    assert tested.returncode == 0, tested.stdout + tested.stderr


@pytest.fixture(scope="module")
def node_exporter() -> str:
    found = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    assert found, (
        "node_exporter is not installed (Debian's prometheus-node-exporter; scripts/services)"
    )
    return found


def _scrape(exporter: str, textfiles: Path) -> dict[str, list[tuple[dict[str, str], float]]]:
    """node_exporter's own textfile collector on loopback, scraped once: sample name -> (labels,
    value) of every sample it serves."""
    import socket
    import time
    import urllib.request

    with socket.socket() as probe:  # a free port on loopback
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [exporter, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
            "--collector.textfile", f"--collector.textfile.directory={textfiles}"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        body = ""
        for _ in range(300):  # until it listens (it logs and binds within a second)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                    body = r.read().decode()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                time.sleep(0.1)
        assert body, "node_exporter never answered"
    finally:
        proc.terminate()
        proc.wait(10)
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def test_two_environments_on_one_node_are_both_served(node_exporter: str, tmp_path: Path) -> None:
    """Two serving venvs on one node, each scanned into its own textfile, and a fleet file beside
    them, read by node_exporter's textfile collector: every series of each file is served (a
    series two files share is a duplicate node_exporter refuses), each archgap_gaps with its own
    value: 1 for the venv whose library has only compute_80 PTX (nothing for a T4, 7.5), 0 for
    the one whose library has sm_75 SASS (libmix.so: sm_75 ... sm_120), under the interpreter
    judged or the name --prometheus-label gave."""
    gap, good = tmp_path / "gap", tmp_path / "good"
    install_fake_distribution(
        make_venv(gap), "ptxkernels", "0.1", {"ptxkernels/libptx.so": CUDA_BIN / "libptxonly.so"}
    )
    install_fake_distribution(
        make_venv(good), "fakekernels", "1.2.3", {"fakekernels/libmix.so": CUDA_BIN / "libmix.so"}
    )
    gap_python, good_python = str(gap / "bin" / "python"), str(good / "bin" / "python")
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    scans = (
        ("archgap-gap.prom", gap_python, ()),
        ("archgap-good.prom", good_python, ()),
        ("archgap-serving.prom", good_python, ("--prometheus-label", "environment=serving")),
    )
    for name, python, extra in scans:
        prom = str(textfiles / name)
        ran = run_cli("scan", "--python", python, "--gpu", "T4", "--prometheus", prom, *extra)
        assert ran.returncode in (0, 1), ran.stderr
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    assert run_cli("probe", "--python", gap_python, "--out", str(inbox)).returncode == 0
    fleet = str(textfiles / "archgap-fleet.prom")
    run_cli("fleet", "--from", str(inbox), "--gpu", "T4", "--prometheus", fleet,
            "--prometheus-label", "site=lab")  # fmt: skip
    served = _scrape(node_exporter, textfiles)
    assert [v for _, v in served["node_textfile_scrape_error"]] == [0]
    gaps = {(labels.get("host"), labels["environment"]): v for labels, v in served["archgap_gaps"]}
    host = os.uname().nodename
    assert gaps == {
        (None, gap_python): 1,
        (None, good_python): 0,
        (None, "serving"): 0,
        (host, gap_python): 1,  # the fleet's host, judged in the interpreter it pushed
    }
    success = {labels["environment"]: v for labels, v in served["archgap_scan_success"]}
    assert success == {gap_python: 1, good_python: 1, "serving": 1, "fleet": 1}
    # --prometheus-label on a fleet file: on every one of its series, and only there.
    for name, samples in served.items():
        for labels, _ in samples if name.startswith("archgap_") else ():
            from_fleet = "host" in labels or labels["environment"] == "fleet"
            assert labels.get("site") == ("lab" if from_fleet else None), (name, labels)


def test_a_bad_prometheus_label_is_one_line(tmp_path: Path) -> None:
    for bad, why in (
        ("nolabel", "expected K=V"),
        ("host=x", "archgap or Prometheus sets"),
        ("1x=y", "not a Prometheus label name"),
        ("__name__=y", "not a Prometheus"),
    ):
        ran = run_cli("scan", "--prometheus", str(tmp_path / "x.prom"), "--prometheus-label", bad)
        assert ran.returncode == 2 and why in ran.stderr, (bad, ran.stderr)
        assert "Traceback" not in ran.stderr and len(ran.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "x.prom").exists()
