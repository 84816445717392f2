"""The probe's sources as they travel (transport/shipped.py): docstrings and comments blanked,
every statement on its own line and column, so a traceback from the target names the source."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

from archgap.transport.bootstrap import probe_sources
from archgap.transport.shipped import shipped

PROBE = Path(__file__).resolve().parents[2] / "src" / "archgap" / "probe"

SOURCE = '''"""Module doc."""
import os  # why os


class C:
    """Class doc
    on two lines."""

    x = """not a docstring: an assignment"""

    def f(self):
        "one-line doc"
        return "# not a comment"  # a comment
'''

EXPECTED = '''""
import os


class C:
    ""


    x = """not a docstring: an assignment"""

    def f(self):
        ""
        return "# not a comment"
'''


def test_docstrings_and_comments_are_blanked_and_nothing_else() -> None:
    assert shipped(SOURCE) == EXPECTED


def _statements(text: str) -> list[tuple[str, int, int]]:
    """Every statement but a docstring, with its line and column."""
    tree = ast.parse(text)
    docstrings = {
        id(node.body[0])
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
        and isinstance(node.body[0].value.value, str)
    }
    return [
        (type(node).__name__, node.lineno, node.col_offset)
        for node in ast.walk(tree)
        if isinstance(node, ast.stmt) and id(node) not in docstrings
    ]


def test_every_probe_module_keeps_its_statements_where_they_were() -> None:
    sent = probe_sources()
    for path in sorted(PROBE.rglob("*.py")):
        name = ".".join(path.relative_to(PROBE).with_suffix("").parts)
        name = name.removesuffix("__init__").removesuffix(".")
        original = path.read_text(encoding="utf-8")
        text = sent[name]
        assert text.count("\n") == original.count("\n"), name
        assert _statements(text) == _statements(original), name
        tokens = tokenize.generate_tokens(io.StringIO(text).readline)
        assert not [t for t in tokens if t.type == tokenize.COMMENT], name
    assert sum(map(len, sent.values())) < 0.8 * sum(
        len(p.read_text(encoding="utf-8")) for p in PROBE.rglob("*.py")
    )
