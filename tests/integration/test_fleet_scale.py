"""The fleet report at 1,000 hosts: documents from `--from` (JSON Lines, four files), judged and
drawn as HTML that stays readable, checked in headless Chromium with a screenshot.

Three real probe documents (archgap probe on three environments) stand for 1,000 hosts:
- libmix.so (SASS sm_75 ... sm_120): native on 12.0;
- libptxonly.so (compute_80 PTX only): PTX JIT on 12.0, no gap;
- flashinfer-python 0.6.8 with CUDA_HOME at a toolkit whose nvcc reports 12.8: FlashInfer's
  SM 12.x rule needs CUDA >= 12.9, so its JIT fails on 12.0 (a gap, shown as a JIT column).
"""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import (
    CUDA_BIN,
    install_fake_distribution,
    json_output,
    make_venv,
    need_data,
    run_cli,
)
from tests.integration.test_fleet import screenshot
from tests.toolkit_stubs import banner_toolkit, venv_python


def _probe(python: Path, env: dict[str, str] | None = None) -> dict[str, object]:
    result = run_cli("probe", "--python", str(python), env=env)
    assert result.returncode == 0, result.stderr
    doc: dict[str, object] = json.loads(result.stdout)
    return doc


def test_fleet_of_1000_hosts_from_documents(tmp_path: Path) -> None:
    need_data("venv-flashinfer-python-0.6.8")
    flashinfer = venv_python("venv-flashinfer-python-0.6.8")
    good, old = tmp_path / "good", tmp_path / "old"
    install_fake_distribution(
        make_venv(good), "fakekernels", "1.2.3", {"fakekernels/libmix.so": CUDA_BIN / "libmix.so"}
    )
    install_fake_distribution(
        make_venv(old), "ptxkernels", "0.1", {"ptxkernels/libptx.so": CUDA_BIN / "libptxonly.so"}
    )
    cuda = banner_toolkit(tmp_path, "12.8")
    kinds = {
        "good": _probe(good / "bin" / "python"),
        "old": _probe(old / "bin" / "python"),
        "incident": _probe(flashinfer, {"CUDA_HOME": str(cuda)}),
    }
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    lines = []
    for i in range(1, 1001):
        kind = "incident" if i % 4 == 0 else "old" if i % 25 == 1 else "good"
        doc = json.loads(json.dumps(kinds[kind]))
        doc["target"] = f"gpu{i:04d}"
        lines.append(json.dumps(doc))
    for part in range(4):
        (inbox / f"part{part}.jsonl").write_text("\n".join(lines[part * 250 : part * 250 + 250]))
    html, prom = tmp_path / "fleet.html", tmp_path / "fleet.prom"
    result = run_cli("fleet", "--from", str(inbox), "--gpu", "12.0", "--html", str(html),
                     "--prometheus", str(prom), "--json")  # fmt: skip
    doc = json_output(result, "fleet")
    assert result.returncode == 1  # the incident hosts have a gap
    assert doc["documents"] == 1000 and len(doc["hosts"]) == 1000
    # 250 incident hosts (every 4th), 30 of the rest old (i % 25 == 1), 720 good.
    assert sorted(g["size"] for g in doc["groups"]) == [30, 250, 720]
    baseline = doc["groups"][0]
    assert doc["baseline"] == baseline["fingerprint"] and baseline["size"] == 720
    assert {d["group"] for d in doc["drift"]} == {g["fingerprint"] for g in doc["groups"][1:]}
    assert doc["jit_coverage"]["packages"] == ["flashinfer-python"]
    statuses = {r["host"]: r["statuses"] for r in doc["jit_coverage"]["rows"]}
    assert statuses["gpu0004"] == ["fails"] and statuses["gpu0002"] == [""]
    # The same verdicts as metrics, read back by prometheus_client's own parser.
    families = {f.name: f.samples for f in text_string_to_metric_families(prom.read_text())}
    jit = {(s.labels["host"], s.labels["package"], s.labels["gpu"], s.labels["status"])
           for s in families["archgap_jit_finding"] if s.value == 1}  # fmt: skip
    assert len(jit) == 250 and ("gpu0004", "flashinfer-python", "12.0", "fails") in jit
    verdicts = {
        (s.labels["host"], s.labels["verdict"]) for s in families["archgap_package_verdict"]
    }
    assert ("gpu0002", "native") in verdicts and ("gpu0001", "jit") in verdicts
    gaps = {s.labels["host"]: s.value for s in families["archgap_gaps"]}
    assert len(gaps) == 1000 and sum(gaps.values()) == 250
    dom = screenshot(html, "fleet-1000", size="1400,1000")
    heatmap = dom.split('<div id="heatmap">')[1].split("</div>")[0]
    assert heatmap.count("<tr>") == 1 + 3  # the header and one row per group, not 1,000 rows
    assert "flashinfer-python (JIT)" in heatmap and ">fails</td>" in heatmap
    assert "12.0 (named)" in heatmap  # the GPUs column
    assert "250: <span title=" in heatmap  # long host lists are cut, whole in the tooltip
    assert len(dom) < 200_000
