"""Prometheus: the alert rules shipped in deploy/prometheus checked by promtool (`check rules`,
and `test rules` on the unit-test file beside them), `promtool check metrics` on the textfiles
archgap writes, and the rules evaluated by promtool on those real files' samples.

Textfile rules (node_exporter's textfile collector): every sample of the file becomes a series of
the node's scrape, labelled with its `instance`; the rules must name metrics archgap writes.
"""

from __future__ import annotations

import json
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
    assert "SUCCESS: 4 rules found" in checked.stdout
    tested = _promtool(promtool, "test", "rules", str(RULE_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def _textfiles(tmp_path: Path) -> dict[str, str]:
    """Real textfiles: a node with a gap (libptxonly.so has only compute_80 PTX, so nothing for
    a T4, 7.5), a node whose interpreter is missing, and a fleet read from pushed documents."""
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
    down = {"command": "probe", "target": "gpu-down", "error": {"kind": "timeout", "message": "-"}}
    (inbox / "gpu-down.json").write_text(json.dumps(down))
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

    host = _fleet_host(files["login"])
    gap = "Run `archgap scan` there for the packages, the GPU and the fix."
    broken = (
        "`archgap scan --health` there prints the reason (no-python, probe-failed, gpu-fault...)."
    )

    def alert(labels: dict[str, str], summary: str, description: str = "") -> dict[str, object]:
        annotations = {"summary": summary, **({"description": description} if description else {})}
        return {"exp_labels": {"severity": "warning", **labels}, "exp_annotations": annotations}

    checks = [
        # One package without a kernel for the T4: one gap, on the node and on the fleet's host.
        ("20m", "ArchgapGap", [
            alert({"instance": "gpu-gap"}, "archgap: 1 CUDA architecture gap(s) on gpu-gap", gap),
            alert({"instance": "login", "host": host},
                  f"archgap: 1 CUDA architecture gap(s) on {host}", gap)]),
        # Nothing judged where the interpreter is missing: a scan failure, not "no gap".
        ("40m", "ArchgapScanFailing", [
            alert({"instance": "gpu-broken"},
                  "archgap: the scan on gpu-broken could not judge the node", broken)]),
        ("40m", "ArchgapHostNotProbed", [
            alert({"instance": "login", "host": "gpu-down", "kind": "timeout"},
                  "archgap: gpu-down was not probed (timeout)")]),
    ]  # fmt: skip
    tests = {"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series, "alert_rule_test": [
            {"eval_time": at, "alertname": name, "exp_alerts": exp} for at, name, exp in checks
        ]}]}  # fmt: skip
    test_file = tmp_path / "real.test.yml"
    test_file.write_text(yaml.safe_dump(tests, sort_keys=False))
    tested = _promtool(promtool, "test", "rules", str(test_file))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def _fleet_host(text: str) -> str:
    (host,) = {
        s.labels["host"]
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "archgap_gaps"
    }
    return host
