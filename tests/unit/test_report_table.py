"""report.table: one table as text (split to a width, or records), Markdown read back by a real
parser (markdown-it, GitHub tables), and CSV read back by the csv module."""

from __future__ import annotations

import csv

from markdown_it import MarkdownIt

from archgap.report.table import Cell, Column, Table, csv_text, markdown_lines, text_lines

HOSTILE = "a | b `c` *d* _e_ [f](g) <h>\nnext"


def table() -> Table:
    columns = (Column("name"), Column("code", code=True), Column("n", align="right"))
    rows = ((Cell(HOSTILE), Cell("x | y `z`"), Cell("7")), (Cell("plain"), Cell(""), Cell("12")))
    return Table(columns, rows, keys=1)


def test_markdown_cells_read_back_as_written() -> None:
    tokens = MarkdownIt("commonmark").enable("table").parse("\n".join(markdown_lines(table())))
    cells = [t for t in tokens if t.type == "inline"]
    assert [c.content for c in cells[:3]] == ["name", "code", "n"]
    first = cells[3].children or []
    # The hostile text is one cell (the pipe did not split it), with no emphasis, link or HTML.
    assert {t.type for t in first} <= {"text", "softbreak", "html_inline"}
    code = [t for t in cells[4].children or [] if t.type == "code_inline"]
    assert [t.content for t in code] == ["x | y `z`"]
    assert len([t for t in tokens if t.type == "tr_open"]) == 3


def test_csv_round_trip() -> None:
    rows = list(csv.reader(csv_text(table()).splitlines(keepends=True)))
    # A cell is one line in every rendering: its newline is shown as \x0a (report.visible).
    shown = HOSTILE.replace("\n", "\\x0a")
    assert rows == [["name", "code", "n"], [shown, "x | y `z`", "7"], ["plain", "", "12"]]


def test_text_splits_to_width_repeating_keys() -> None:
    wide = Table(
        (Column("package"), *(Column(f"GPU{i}", "12.0") for i in range(6))),
        ((Cell("torch"), *(Cell("native") for _ in range(6))),),
        keys=1,
    )
    assert len(text_lines(wide)[0]) == len("package  " + "  ".join(["GPU0  "] * 6).rstrip())
    parts = text_lines(wide, width=30)
    headers = [line for line in parts if line.startswith("package")]
    assert len(headers) == 3 and all(len(line) <= 30 for line in parts)
    # Too narrow for the key and one column: one record per row instead.
    assert text_lines(wide, width=10)[:2] == ["torch", "  GPU0 (12.0)  native"]


def test_markup_escape_is_shown_literally_by_rich() -> None:
    # Table cells are escaped without importing rich; rich's own parser must show them as they
    # are, and the result is what rich.markup.escape gives.
    from rich.markup import escape
    from rich.text import Text

    from archgap.report.table import markup_escape

    samples = [
        "plain",
        "[bold]not bold[/]",
        "lib[cuda]/x.so",
        "\\[red]",
        "a\\\\[b] c[/d] [#ff0000] [@click] [1] [",
        "ends with a backslash\\",
        HOSTILE,
    ]
    for text in samples:
        assert markup_escape(text) == escape(text)
        assert Text.from_markup(f"[cyan]{markup_escape(text)}[/]").plain == text
    # Two trailing backslashes read back as one in rich itself; the same string either way.
    assert markup_escape("two\\\\") == escape("two\\\\")
