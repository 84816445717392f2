"""gates on a package that carries vendored, example and test trees: those are left out by
default with a count (--all shows them), --kind filters, paths are from site-packages, and the
JSON module of a file in a directory without __init__.py is its dotted path from there."""

from __future__ import annotations

import csv
import textwrap
from pathlib import Path

from tests.helpers import json_output, run_cli

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
    doc = json_output(run_cli("gates", "--path", str(package), "--json"), "gates")
    (target,) = doc["gates"]["targets"]
    assert sorted(f["module"] for f in target["functions"]) == ["pkg.core", "pkg.jit.nsp.gen"]
    left = doc["left_out"]
    assert (left["gates"], left["functions"]) == (6, 3)
    assert sorted(tuple(t) for t in left["trees"]) == [
        ("example", "pkg/examples", 2),
        ("test", "pkg/tests", 2),
        ("vendored", "pkg/data", 2),
    ]
    text = run_cli("gates", "--path", str(package)).stdout
    assert "\n  pkg/jit/nsp/gen.py\n" in text and "conv2d" not in text
    assert text.rstrip().endswith("--all shows them")
    everything = json_output(run_cli("gates", "--path", str(package), "--all", "--json"), "gates")
    assert len(everything["gates"]["targets"][0]["functions"]) == 5
    assert everything["left_out"]["gates"] == 0
    assert (
        "pkg/data/cutlass/examples/conv2d.py"
        in run_cli("gates", "--path", str(package), "--all").stdout
    )


def test_kind_filter_and_csv(tmp_path: Path) -> None:
    package = tree(tmp_path)
    result = run_cli("gates", "--path", str(package), "--kind", "raise", "--format", "csv")
    header, *rows = list(csv.reader(result.stdout.splitlines()))
    assert header == ["target", "where", "function", "kind", "gate", "condition"]
    assert [(r[1], r[3], r[4]) for r in rows] == [
        ("pkg/core.py:3", "raise", "needs sm_90"),
        ("pkg/jit/nsp/gen.py:3", "raise", "needs sm_90"),
    ]
    bad = run_cli("gates", "--path", str(package), "--kind", "raises")
    assert bad.returncode == 2 and "--kind raises: choose from" in bad.stderr


def test_trace_leaves_the_same_trees_out(tmp_path: Path) -> None:
    package = tree(tmp_path)
    doc = json_output(run_cli("trace", "major", str(package), "--json"), "trace")
    shown = {o["path"].split("site-packages/")[1] for o in doc["trace"]["occurrences"]}
    assert shown == {"pkg/core.py", "pkg/jit/nsp/gen.py"}
    left = doc["left_out"]
    assert left["files"] == 3
    assert sorted((kind, path) for kind, path, _ in left["trees"]) == [
        ("example", "pkg/examples"),
        ("test", "pkg/tests"),
        ("vendored", "pkg/data"),
    ]
    everything = json_output(run_cli("trace", "major", str(package), "--all", "--json"), "trace")
    total = len(everything["trace"]["occurrences"])
    assert total == len(doc["trace"]["occurrences"]) + left["occurrences"]
    assert everything["left_out"]["occurrences"] == 0
    text = run_cli("trace", "major", str(package)).stdout
    assert text.rstrip().endswith("--all shows them") and "\n  pkg/jit/nsp/gen.py\n" in text
