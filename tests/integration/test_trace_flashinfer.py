"""`archgap trace TARGET_CUDA_ARCHS` on the real flashinfer-python 0.6.8 and 0.6.16 wheels
(installed --no-deps by scripts/testdata, never imported): the api's result through the
renderers the CLI prints (in-process), and the CLI itself for its usage errors.

Expected lines were read off the released files by hand (sed -n on
flashinfer/compilation_context.py): in 0.6.8 ``self.TARGET_CUDA_ARCHS = set()`` is line 62, the
FLASHINFER_CUDA_ARCH_LIST branch adds at 70 and 72, auto-detection adds at 79 inside the try of
line 76 whose ``except Exception as e:`` is line 80, and ``raise RuntimeError("SM 12.x requires
CUDA >= 12.9")`` is line 56. In 0.6.16 the same code sits at 89, 97, 99, 106, try 103, except 107,
raise 83."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from archgap import api
from archgap.report import trace as trace_report
from archgap.report.console import plain_text
from archgap.report.jsondoc import schema
from archgap.results import TraceResult
from tests.helpers import json_output, run_cli
from tests.toolkit_stubs import venv_python

RELEASES = {
    #          writes            try  except raise
    "0.6.8": ((62, 70, 72, 79), 76, 80, 56),
    "0.6.16": ((89, 97, 99, 106), 103, 107, 83),
}


def flashinfer_python(version: str) -> Path:
    python = venv_python(f"venv-flashinfer-python-{version}")
    if not python.exists():
        pytest.skip("scripts/testdata has not installed the flashinfer wheels")
    return python


@functools.cache  # one trace per release serves every test (read-only use)
def traced(version: str) -> TraceResult:
    python = str(flashinfer_python(version))
    return api.trace("TARGET_CUDA_ARCHS", python=python, dists=["flashinfer-python"])


@functools.cache
def trace_json(version: str) -> dict[str, Any]:
    doc = trace_report.document(traced(version))
    jsonschema.validate(doc, schema("trace"))
    trace: dict[str, Any] = doc["trace"]
    return trace


def relative(path: str) -> str:
    return path.split("site-packages/", 1)[1]


@pytest.mark.parametrize("version", sorted(RELEASES))
def test_writes_in_compilation_context_come_before_the_reads(version: str) -> None:
    write_lines, _, _, _ = RELEASES[version]
    trace = trace_json(version)
    assert trace["roots"] == [f"flashinfer-python {version}"]
    occurrences = trace["occurrences"]
    writes = [o for o in occurrences if o["kind"] == "write"]
    assert [(relative(o["path"]), o["line"]) for o in writes] == [
        ("flashinfer/compilation_context.py", line) for line in write_lines
    ]
    assert [o["form"] for o in writes] == ["assign", "mutate:.add", "mutate:.add", "mutate:.add"]
    assert {o["function"] for o in writes} == {"CompilationContext.__init__"}
    kinds = [o["kind"] for o in occurrences]
    assert kinds == ["write"] * 4 + ["read"] * (len(kinds) - 4)
    read_files = {relative(o["path"]) for o in occurrences if o["kind"] == "read"}
    assert {"flashinfer/jit/core.py", "flashinfer/jit/env.py"} <= read_files
    core = [o for o in occurrences if relative(o["path"]) == "flashinfer/jit/core.py"]
    assert [o["function"] for o in core] == ["check_cuda_arch"]


@pytest.mark.parametrize("version", sorted(RELEASES))
def test_branches_of_the_writes(version: str) -> None:
    _, try_line, _, _ = RELEASES[version]
    writes = [o for o in trace_json(version)["occurrences"] if o["kind"] == "write"]
    branches = [[(g["kind"], g["condition"]) for g in o["branch"]] for o in writes]
    env_test = '"FLASHINFER_CUDA_ARCH_LIST" in os.environ'
    assert branches[0] == []
    assert branches[1][0] == ("if", env_test) and branches[1][-1] == (
        "if",
        "minor[-1].isalpha()",
    )
    assert branches[2][0] == ("if", env_test) and branches[2][-1][0] == "else"
    assert [g["kind"] for g in writes[3]["branch"]] == ["else", "try", "for"]
    assert writes[3]["branch"][0]["condition"] == env_test
    assert writes[3]["branch"][1]["line"] == try_line


@pytest.mark.parametrize("version", sorted(RELEASES))
def test_knobs_reach_the_writes(version: str) -> None:
    writes = [o for o in trace_json(version)["occurrences"] if o["kind"] == "write"]
    # The four writes of TARGET_CUDA_ARCHS in the released flashinfer/jit/core.py (RELEASES).
    assert [w["line"] for w in writes] == list(RELEASES[version][0])
    for write in writes:
        knobs = {k["variable"]: k for k in write["knobs"]}
        assert {"FLASHINFER_CUDA_ARCH_LIST", "CUDA_HOME", "CUDA_PATH"} <= set(knobs)
        path = [f["function"].rsplit(".", 1)[-1] for f in knobs["CUDA_HOME"]["call_path"]]
        assert path == [
            "__init__",
            "_normalize_cuda_arch",
            "is_cuda_version_at_least",
            "get_cuda_version",
            "get_cuda_path",
        ]
        assert relative(knobs["CUDA_HOME"]["path"]) == "flashinfer/jit/cpp_ext.py"


@pytest.mark.parametrize("version", sorted(RELEASES))
def test_the_except_swallows_what_the_auto_detect_write_raises(version: str) -> None:
    write_lines, try_line, except_line, raise_line = RELEASES[version]
    writes = {o["line"]: o for o in trace_json(version)["occurrences"] if o["kind"] == "write"}
    assert [writes[line]["swallowed"] for line in write_lines[:3]] == [[], [], []]
    (swallow,) = writes[write_lines[3]]["swallowed"]
    assert (swallow["try_line"], swallow["except_line"]) == (try_line, except_line)
    assert swallow["handler"] == "except Exception as e:"
    assert swallow["action"].startswith("logger.warning(")
    sm12 = [r for r in swallow["raisers"] if r["message"] == "SM 12.x requires CUDA >= 12.9"]
    assert len(sm12) == 1
    assert relative(sm12[0]["path"]) == "flashinfer/compilation_context.py"
    assert sm12[0]["line"] == raise_line
    assert sm12[0]["call_path"][0]["line"] == write_lines[3]
    external = {c["call"] for c in swallow["external_calls"]}
    assert "torch.cuda.get_device_capability" in external


def test_text_output_tells_the_story() -> None:
    text = plain_text("\n".join(trace_report.text(traced("0.6.8"))))
    assert text is not None
    assert text.index("Writes") < text.index("compilation_context.py") < text.index("Reads")
    assert text.index("Reads") < text.index("flashinfer/jit/core.py")
    assert "except Exception as e: (line 80, try at 76)" in text
    assert "SM 12.x requires CUDA >= 12.9" in text
    assert "CUDA_HOME" in text and "FLASHINFER_CUDA_ARCH_LIST" in text
    # flashinfer/jit/attention/fmha_v2/ has no __init__.py (a namespace package): the file is
    # still named by its path from site-packages, in the text and as the JSON module.
    assert "\n  flashinfer/jit/attention/fmha_v2/fmha_library.py\n" in text
    modules = {relative(o["path"]): o["module"] for o in trace_json("0.6.8")["occurrences"]}
    fmha = "flashinfer/jit/attention/fmha_v2/fmha_library.py"
    assert modules[fmha] == "flashinfer.jit.attention.fmha_v2.fmha_library"


def test_whole_site_packages_by_default_and_usage_errors() -> None:
    python = flashinfer_python("0.6.8")
    site = sorted(python.parent.parent.glob("lib/python*/site-packages"))
    result = run_cli("trace", "check_cuda_arch", "--python", str(python), "--json")
    assert result.returncode == 0, result.stderr
    trace = json_output(result, "trace")["trace"]
    assert trace["roots"] == [str(p) for p in site]
    defs = [o for o in trace["occurrences"] if o["form"] == "def"]
    assert [(relative(o["path"]), o["line"]) for o in defs] == [("flashinfer/jit/core.py", 96)]

    unknown = run_cli("trace", "X", "--python", str(python), "--dist", "no-such-dist")
    assert unknown.returncode == 2
    assert "unknown distribution 'no-such-dist'" in unknown.stderr
    bad = run_cli("trace", "X; rm -rf /", "--json")
    assert bad.returncode == 2
    assert "shell characters" in bad.stderr
    missing = run_cli("trace", "X", "/no/such/dir")
    assert missing.returncode == 2


def test_markdown_table_of_the_occurrences() -> None:
    from markdown_it import MarkdownIt

    tokens = (
        MarkdownIt("commonmark").enable("table").parse(trace_report.markdown_of(traced("0.6.8")))
    )
    rows: list[list[str]] = []
    for i, token in enumerate(tokens):
        if token.type == "tr_open":
            rows.append([])
        elif token.type == "inline" and rows and tokens[i - 1].type in ("td_open", "th_open"):
            code = [c.content for c in token.children or [] if c.type == "code_inline"]
            rows[-1].append(code[0] if code else token.content)
    header, *body = rows
    assert header == ["kind", "where", "function", "form", "code", "branch"]
    # The same occurrences as the JSON, writes first, each where the released file has it.
    occurrences = trace_json("0.6.8")["occurrences"]
    assert [(r[0], r[1]) for r in body] == [
        (o["kind"], f"{relative(o['path'])}:{o['line']}") for o in occurrences
    ]
    assert body[0][4] == "self.TARGET_CUDA_ARCHS = set()"  # compilation_context.py:62
    # The swallowed raise, as a reader sees the list item (escapes resolved by the parser).
    items = [
        "".join(c.content for c in t.children or [] if c.type == "text")
        for i, t in enumerate(tokens)
        if t.type == "inline" and tokens[i - 2].type == "list_item_open"
    ]
    assert any("RuntimeError('SM 12.x requires CUDA >= 12.9') raised at" in i for i in items)
