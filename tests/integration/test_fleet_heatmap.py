"""The heat map of a big fleet, laid out by headless Chromium at 1,400 px: the column with the gap
is on screen even when two dozen packages come before it alphabetically, each group's row is one
line, and hosts whose probe failed are a red row.

1,000 hosts from three real probe documents: 960 with 24 packages whose libmix.so carries sm_75
SASS (native on a T4, 7.5), 30 with one more package whose libptxonly.so has only compute_80 PTX
(which a 7.5 GPU cannot run: a gap), and 10 whose probe timed out. The page is measured by a
script added to a copy of it (the page itself has none): element boxes as Chromium lays them out.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.helpers import CUDA_BIN, install_fake_distribution, make_venv, run_cli
from tests.integration.test_fleet import screenshot

WIDTH = 1400
MEASURE = """<script>
const box = e => e.getBoundingClientRect();
const rows = [...document.querySelectorAll('#heatmap table.heat tr')].slice(1);
const gap = [...document.querySelectorAll('#heatmap th')].find(t => t.textContent === 'zz-ptx');
const failed = document.querySelector('#heatmap td.failed');
document.body.setAttribute('data-layout', JSON.stringify({
  width: innerWidth, gapRight: gap ? box(gap).right : null,
  rowHeights: rows.map(r => box(r).height),
  failed: failed ? [getComputedStyle(failed).backgroundColor, failed.textContent] : null}));
</script></body>"""


def _probe(python: Path) -> dict[str, object]:
    result = run_cli("probe", "--python", str(python))
    assert result.returncode == 0, result.stderr
    doc: dict[str, object] = json.loads(result.stdout)
    return doc


def test_heatmap_of_1000_hosts_at_1400_px(tmp_path: Path) -> None:
    kinds = {}
    for kind, extra in (("good", False), ("gap", True)):
        site = make_venv(tmp_path / kind)
        for n in range(1, 25):
            name = f"cuda-pkg-{n:02d}"
            install_fake_distribution(
                site, name, "1.0", {f"{name}/libmix.so": CUDA_BIN / "libmix.so"}
            )
        if extra:
            install_fake_distribution(
                site, "zz-ptx", "0.1", {"zz/libptx.so": CUDA_BIN / "libptxonly.so"}
            )
        kinds[kind] = _probe(tmp_path / kind / "bin" / "python")
    lines = []
    for i in range(1, 1001):
        doc: dict[str, object]
        if i % 100 == 0:
            doc = {"command": "probe", "target": f"gpu{i:04d}",
                   "error": {"kind": "timeout", "message": "no answer in 60 s"}}  # fmt: skip
        else:
            doc = {**kinds["gap" if i % 33 == 0 else "good"], "target": f"gpu{i:04d}"}
        lines.append(json.dumps(doc))
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "fleet.jsonl").write_text("\n".join(lines) + "\n")
    html = tmp_path / "fleet.html"
    result = run_cli("fleet", "--from", str(inbox), "--gpu", "T4", "--html", str(html))
    assert result.returncode == 1, result.stderr  # the 30 hosts with zz-ptx have a gap

    measured = tmp_path / "measured.html"
    measured.write_text(html.read_text().replace("</body>", MEASURE, 1))
    dom = screenshot(measured, "fleet-1000-heatmap", size=f"{WIDTH},1000")
    found = re.search(r'data-layout="([^"]*)"', dom)
    assert found, "the measuring script did not run"
    layout = json.loads(found.group(1).replace("&quot;", '"'))
    assert layout["width"] == WIDTH
    # The gap's column is on screen, not past two dozen native columns.
    assert layout["gapRight"] is not None and layout["gapRight"] <= WIDTH, layout
    # Two groups and one failed row, each one line of 14 px text (with padding and border).
    assert len(layout["rowHeights"]) == 3 and max(layout["rowHeights"]) <= 32, layout
    # The hosts whose probe failed: red (#cf222e), with why.
    assert layout["failed"] == ["rgb(207, 34, 46)", "not probed: timeout"], layout
