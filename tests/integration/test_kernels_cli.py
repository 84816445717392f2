"""`archgap kernels` end to end: text, --all, --deep, --json validated against its schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from archgap.cli import main
from archgap.report.jsondoc import schema

BIN = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["kernels", "--json", *args])
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, schema("kernels"))
    return code, doc


def test_json_over_all_fixtures(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_json(capsys, str(BIN))
    assert code == 0
    assert doc["command"] == "kernels"
    assert doc["summary"]["files"] == len(list(BIN.iterdir()))
    by_name = {Path(f["path"]).name: f for f in doc["files"]}
    mix = [(e["kind"], e["arch"], e["variant"]) for e in by_name["libmix.so"]["entries"]]
    assert mix.count(("sass", 103, "f")) == 2  # -gencode arch=compute_103f,code=sm_103f


def test_json_deep_and_exit_code_for_missing_path(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_json(capsys, "--deep", str(BIN / "libhidden.so"), str(BIN / "missing.so"))
    assert code == 2
    hidden, missing = doc["files"]
    assert len(hidden["entries"]) == 4 and not any(e["listed"] for e in hidden["entries"])
    assert missing["format"] == "unreadable"
    assert missing["error"] == "no such file or directory"
    assert missing["deep"] is True  # as the probe section on a remote target reports it
    assert doc["summary"]["unreadable"] == 1


def test_a_missing_path_is_an_error_line_and_the_rest_is_listed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    missing = str(BIN / "missing.so")
    assert main(["kernels", missing, str(BIN / "libmix.so")]) == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == [f"archgap: no such file or directory: {missing}"]
    assert missing not in out and str(BIN / "libmix.so") in out


def test_text_dedupes_targets_and_all_shows_entries(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernels", str(BIN / "libcomp_speed.so")]) == 0
    text = capsys.readouterr().out
    assert "sm_120a" in text and "compute_90" in text and "lz4" in text
    assert "1 files, 1 with device code, 5 entries" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("sm_80"))
    assert row.rstrip().endswith("2")  # dlink + kernel container, shown once with a count
    assert main(["kernels", "--all", str(BIN / "libcomp_speed.so")]) == 0
    rows = [
        line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("sm_80")
    ]
    assert len(rows) == 2


def test_text_reports_unreadable_rows(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "libgone.so").symlink_to("nowhere.so")
    code = main(["kernels", str(tmp_path), str(BIN / "libempty.so")])
    text = capsys.readouterr().out
    assert code == 2
    assert "dangling symlink to nowhere.so" in text
    assert "no device code" in text  # named on the command line, so shown


def test_text_deep_counts_what_cuobjdump_does_not_list(capsys: pytest.CaptureFixture[str]) -> None:
    # build.sh hides a fatbin (sm_86, sm_110f, compute_89) and a bare sm_89 cubin in data.
    assert main(["kernels", "--deep", str(BIN / "libhidden.so")]) == 0
    text = capsys.readouterr().out
    # Not a terminal, so no colour: the hidden rows carry a marker instead, and the line says so.
    assert "1 files, 1 with device code, 4 entries (4 not listed by cuobjdump, marked *)" in text
    marked = [line.split()[0] for line in text.splitlines() if line.strip().endswith(" 1")]
    assert sorted(marked) == ["compute_89", "sm_110f", "sm_86", "sm_89"]
    assert all(f"{t} *" in text for t in marked)


def test_csv_and_markdown_carry_the_same_rows(capsys: pytest.CaptureFixture[str]) -> None:
    import csv

    from markdown_it import MarkdownIt

    paths = [str(BIN / "libhidden.so"), str(BIN / "libcomp_speed.so")]
    _, doc = run_json(capsys, "--deep", *paths)
    assert main(["kernels", "--deep", "--format", "csv", *paths]) == 0
    header, *rows = list(csv.reader(capsys.readouterr().out.splitlines()))
    assert header[0] == "file" and header[-1] == "cuobjdump"
    # libhidden: the 4 entries build.sh hides in data (none listed); libcomp_speed: sm_80, sm_120a
    # and compute_90, each listed.
    hidden = [r for r in rows if r[0].endswith("libhidden.so")]
    assert sorted(r[1] for r in hidden) == ["compute_89", "sm_110f", "sm_86", "sm_89"]
    assert {r[-1] for r in hidden} == {"not listed"}
    assert {r[-1] for r in rows if r[0].endswith("libcomp_speed.so")} == {"listed"}
    stored = sum(int(r[header.index("stored")]) for r in hidden)  # bytes, not KiB, in CSV
    assert stored == sum(e["stored_size"] for e in doc["files"][0]["entries"])
    assert main(["kernels", "--deep", "--format", "markdown", *paths]) == 0
    tokens = MarkdownIt("commonmark").enable("table").parse(capsys.readouterr().out)
    assert sum(t.type == "table_open" for t in tokens) == 2
    assert sum(t.type == "tr_open" for t in tokens) == 2 + len(rows)  # two headers, every row


def test_a_local_wheel_loads_no_index_image_or_gpu_code() -> None:
    """`kernels WHEEL` reads a file here: the resolver (packaging), the HTTP fetcher, the image
    readers and the GPU knowledge (only --require needs it) are not imported for it."""
    import subprocess
    import sys

    from tests.helpers import need_data

    (wheels,) = need_data("wheels")
    (wheel,) = wheels.glob("nvidia_cuda_runtime-*.whl")
    code = (
        "import io, sys, json, contextlib; from archgap.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()): main(['kernels', sys.argv[1]])\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('archgap.', 'packaging',"
        " 'urllib.request')))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(wheel)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    assert "archgap.archives.wheel" in loaded
    unwanted = ("archgap.index.resolve", "archgap.index.fetch", "archgap.image.read",
                "archgap.analysis.verdicts.compat", "packaging", "urllib.request")  # fmt: skip
    assert [m for m in unwanted if m in loaded] == []
