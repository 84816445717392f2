"""Hostile corpus: what archgap prints. A host, GPU or package name from a ``fleet --from``
document (or an interpreter path in an error) may carry control characters: a newline or CR forges
lines, ESC/OSC sequences recolour, clear or retitle the terminal, C1 controls do the same on some
terminals, and bidirectional controls reorder what the reader sees (CVE-2021-42574, Trojan
Source). Each class puts one such character into every name of one document; the expected
outcome, from those rules: the character never appears raw in text, Markdown, CSV or JSON, and no
line starts with the forged text; in text, Markdown and CSV it is the visible escape \\xNN (below
U+0100) or \\uNNNN; JSON keeps the value exact (as a \\u escape); a Prometheus label value, after
the exposition format's own escapes (backslash, quote, newline), reads back through
prometheus_client's parser (from the file read as text, universal newlines, the way line readers
see it) as the same visible form, a newline as itself.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from markdown_it import MarkdownIt
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import DATA, json_output, run_cli

# (class id, the character): C0 controls, DEL, C1 controls, the bidi embeddings, overrides,
# isolates and marks, and the line and paragraph separators.
CHARACTERS = [
    ("nul", "\x00"),
    ("backspace", "\x08"),
    ("tab", "\t"),
    ("newline", "\n"),
    ("vertical-tab", "\x0b"),
    ("form-feed", "\x0c"),
    ("carriage-return", "\r"),
    ("esc-csi-clear", "\x1b[2J"),
    ("esc-osc-title", "\x1b]0;pwned\x07"),
    ("file-separator", "\x1c"),
    ("del", "\x7f"),
    ("c1-nel", "\x85"),
    ("c1-csi", "\x9b"),
    ("bidi-lre", "\u202a"),
    ("bidi-rle", "\u202b"),
    ("bidi-pdf", "\u202c"),
    ("bidi-lro", "\u202d"),
    ("bidi-rlo", "\u202e"),
    ("bidi-lri", "\u2066"),
    ("bidi-rli", "\u2067"),
    ("bidi-fsi", "\u2068"),
    ("bidi-pdi", "\u2069"),
    ("mark-lrm", "\u200e"),
    ("mark-rlm", "\u200f"),
    ("mark-alm", "\u061c"),
    ("line-separator", "\u2028"),
    ("paragraph-separator", "\u2029"),
]
UNSAFE = {c for _, text in CHARACTERS for c in text if not c.isprintable()} - {"\n"}  # "\n": layout
VENV = DATA / "venv-nvidia-cuda-runtime-13.0.96"


def visible(text: str) -> str:
    """The rule: each control or bidi character as \\xNN below U+0100, else \\uNNNN."""
    return "".join(
        c if c.isprintable() else (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
        for c in text
    )


def names(cid: str, char: str) -> dict[str, str]:
    return {
        "host": f"h-{cid}{char}FORGED-{cid} host",
        "gpu": f"NVIDIA H100{char}FORGED-{cid} gpu",
        "package": f"pkg-{cid}{char}FORGED-{cid}",
    }


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One real probe of an environment with CUDA libraries; one document per class generated
    from it; fleet's text, Markdown, CSV, JSON and Prometheus outputs of them all."""
    if not VENV.exists():
        pytest.skip("scripts/testdata has not installed nvidia-cuda-runtime 13.0.96")
    probe = run_cli("probe", "--python", str(VENV / "bin" / "python"), "--json")
    assert probe.returncode == 0, probe.stderr
    inbox = tmp_path_factory.mktemp("hostile-docs")
    for cid, char in CHARACTERS:
        doc = json.loads(probe.stdout)
        shown = names(cid, char)
        doc["target"] = doc["facts"]["host"] = shown["host"]
        sections = doc["facts"]["sections"]
        gpu = {"index": 0, "name": shown["gpu"], "uuid": f"GPU-{cid}"}
        sections["gpu"]["gpus"] = [{**gpu, "compute_capability": "9.0", "source": "nvidia-smi"}]
        for dist in sections["python"]["distributions"]:
            dist["name"] = shown["package"]
        (inbox / f"{cid}.json").write_text(json.dumps(doc))
    prom = inbox.parent / "fleet.prom"
    found: dict[str, Any] = {}
    for fmt in ("text", "markdown", "csv", "json"):
        result = run_cli("fleet", "--from", str(inbox), "--gpu", "H100", "--format", fmt,
                         "--prometheus", str(prom))  # fmt: skip
        assert result.returncode in (0, 1), result.stderr
        assert result.stderr == ""
        found[fmt] = json_output(result, "fleet") if fmt == "json" else result.stdout
        found[fmt + "-raw"] = result.stdout
    found["prometheus"] = prom.read_text()  # universal newlines: as a line reader sees it
    return found


def markdown_cells(text: str) -> list[str]:
    """Each table cell's text as a Markdown reader (markdown-it, GitHub tables) shows it."""
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    inline = [t for t in tokens if t.type == "inline"]
    return ["".join(c.content for c in t.children or []) for t in inline]


def prometheus_hosts(text: str) -> set[str]:
    return {
        s.labels["host"]
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if "host" in s.labels
    }


@pytest.mark.parametrize(("cid", "char"), [pytest.param(c, t, id=c) for c, t in CHARACTERS])
def test_a_control_or_bidi_character_in_a_name_is_shown_never_sent(
    outputs: dict[str, Any], cid: str, char: str
) -> None:
    shown = names(cid, char)
    for fmt in ("text", "markdown", "csv", "json-raw"):
        assert not UNSAFE & set(outputs[fmt]), fmt  # no class's character is raw anywhere
        lines = outputs[fmt].split("\n")
        assert not any(line.lstrip("-| ").startswith(f"FORGED-{cid}") for line in lines), fmt
    text = outputs["text"]
    for key in ("host", "gpu", "package"):
        assert visible(shown[key]) in text, key
    assert visible(shown["host"]) in markdown_cells(outputs["markdown"])  # as a reader sees it
    rows = list(csv.reader(io.StringIO(outputs["csv"])))
    assert [visible(shown["host"])] == [r[0] for r in rows if f"h-{cid}" in r[0]]
    assert visible(shown["package"]) in rows[0]  # a package is a column of the coverage
    doc = outputs["json"]  # data: the exact value
    assert shown["host"] in [h["name"] for h in doc["hosts"]]
    expected = "\n".join(visible(part) for part in shown["host"].split("\n"))
    assert expected in prometheus_hosts(outputs["prometheus"])


# --- errors are one line -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "python",
    [
        pytest.param("/nonexistent/py\nFORGED: second line", id="error-newline"),
        pytest.param("/nonexistent/py\r\nFORGED: crlf\r\n", id="error-crlf"),
        pytest.param("/nonexistent/py\x1b[2J\u202e\u2028FORGED", id="error-escapes"),
    ],
)
def test_an_error_is_one_line_with_nothing_raw(python: str) -> None:
    result = run_cli("scan", "--python", python)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("archgap: ")
    assert not UNSAFE & set(result.stderr)
    doc = json.loads(run_cli("scan", "--python", python, "--json").stdout)
    assert "\n" not in doc["error"] and "FORGED" in doc["error"]


def test_prometheus_file_with_every_class_is_read_by_the_parser_line_by_line(
    outputs: dict[str, Any],
) -> None:
    """Every line of the file is a comment or one sample (a CR or separator inside a value would
    split a sample for line readers: node_exporter's textfile collector reads lines)."""
    text = outputs["prometheus"]
    for line in text.splitlines():  # str.splitlines: every line end Python knows
        assert line.startswith("#") or line.rsplit(" ", 1)[-1].replace(".", "").isdigit(), line
    hosts = prometheus_hosts(text)
    assert len({h for h in hosts if h.startswith("h-")}) == len(CHARACTERS)
