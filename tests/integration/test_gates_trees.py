"""gates on a package that carries vendored, example and test trees: those are left out by
default with a count (--all shows them), --kind filters, paths are from site-packages, and the
JSON module of a file in a directory without __init__.py is its dotted path from there. The
api's results through the renderers the CLI prints (in-process)."""

from __future__ import annotations

import csv
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from archgap import api
from archgap.report import gates as gates_report
from archgap.report import trace as trace_report
from archgap.report.console import plain_text
from archgap.report.jsondoc import schema


def gates_doc(package: Path, **settings: Any) -> dict[str, Any]:
    doc: dict[str, Any] = gates_report.document(api.gates(paths=[str(package)], **settings))
    jsonschema.validate(doc, schema("gates"))
    return doc


def trace_doc(package: Path, **settings: Any) -> dict[str, Any]:
    doc: dict[str, Any] = trace_report.document(
        api.trace("major", paths=[str(package)], **settings)
    )
    jsonschema.validate(doc, schema("trace"))
    return doc


def text(lines: list[str]) -> str:
    """The rendered lines as the CLI prints them into a pipe."""
    plain = plain_text("\n".join(lines))
    assert plain is not None
    return plain + "\n"


GATE = 'def {name}(major):\n    if major >= 9:\n        raise RuntimeError("needs sm_90")\n'


def tree(tmp_path: Path) -> Path:
    """site-packages/pkg: one real gate module; a vendored copy, an example and a test, each
    with the same two gates (a comparison and a raise)."""
    package = tmp_path / "lib" / "python3.11" / "site-packages" / "pkg"
    files = {
        "core.py": "core",
        "jit/nsp/gen.py": "gen",  # jit/nsp has no __init__.py: a namespace package
        "data/cutlass/examples/conv2d.py": "conv",
        "examples/demo.py": "demo",
        "tests/test_core.py": "test_it",
    }
    for relative, name in files.items():
        path = package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(GATE.format(name=name)))
    (package / "__init__.py").write_text("")
    (package / "jit" / "__init__.py").write_text("")
    return package


def test_trees_left_out_by_default(tmp_path: Path) -> None:
    package = tree(tmp_path)
    doc = gates_doc(package)
    (target,) = doc["gates"]["targets"]
    assert sorted(f["module"] for f in target["functions"]) == ["pkg.core", "pkg.jit.nsp.gen"]
    left = doc["left_out"]
    assert (left["gates"], left["functions"]) == (6, 3)
    assert sorted(tuple(t) for t in left["trees"]) == [
        ("example", "pkg/examples", 2),
        ("test", "pkg/tests", 2),
        ("vendored", "pkg/data", 2),
    ]
    shown = text(gates_report.text(api.gates(paths=[str(package)])))
    assert "\n  pkg/jit/nsp/gen.py\n" in shown and "conv2d" not in shown
    assert shown.rstrip().endswith("--all shows them")
    everything = gates_doc(package, show_all=True)
    assert len(everything["gates"]["targets"][0]["functions"]) == 5
    assert everything["left_out"]["gates"] == 0
    every_line = text(gates_report.text(api.gates(paths=[str(package)], show_all=True)))
    assert "pkg/data/cutlass/examples/conv2d.py" in every_line


def test_kind_filter_and_csv(tmp_path: Path) -> None:
    package = tree(tmp_path)
    table = gates_report.csv_of(api.gates(paths=[str(package)], kinds=["raise"]))
    header, *rows = list(csv.reader(table.splitlines()))
    assert header == ["target", "where", "function", "kind", "gate", "condition"]
    assert [(r[1], r[3], r[4]) for r in rows] == [
        ("pkg/core.py:3", "raise", "needs sm_90"),
        ("pkg/jit/nsp/gen.py:3", "raise", "needs sm_90"),
    ]
    with pytest.raises(api.UsageError, match="--kind raises: choose from"):
        api.gates(paths=[str(package)], kinds=["raises"])


def test_trace_leaves_the_same_trees_out(tmp_path: Path) -> None:
    package = tree(tmp_path)
    doc = trace_doc(package)
    shown = {o["path"].split("site-packages/")[1] for o in doc["trace"]["occurrences"]}
    assert shown == {"pkg/core.py", "pkg/jit/nsp/gen.py"}
    left = doc["left_out"]
    assert left["files"] == 3
    assert sorted((kind, path) for kind, path, _ in left["trees"]) == [
        ("example", "pkg/examples"),
        ("test", "pkg/tests"),
        ("vendored", "pkg/data"),
    ]
    everything = trace_doc(package, show_all=True)
    total = len(everything["trace"]["occurrences"])
    assert total == len(doc["trace"]["occurrences"]) + left["occurrences"]
    assert everything["left_out"]["occurrences"] == 0
    lines = text(trace_report.text(api.trace("major", paths=[str(package)])))
    assert lines.rstrip().endswith("--all shows them") and "\n  pkg/jit/nsp/gen.py\n" in lines
