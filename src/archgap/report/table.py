"""One table, three renderings: aligned text (plain for pipes, styled for a terminal), Markdown
and CSV.

Text never truncates a cell. Given a width (a terminal), a table wider than it is split by
columns into several tables, each repeating the leading key columns (package, version); a cell
that still does not fit is shown whole and the terminal wraps the line. Without a width (a pipe,
a file) the table is printed at its full width.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from archgap.report.visible import literal

GAP = "  "


@dataclass(frozen=True)
class Column:
    title: str
    sub: str = ""  # a second header line (a GPU's compute capability under its name)
    align: str = "left"  # left | right | center
    code: bool = False  # Markdown shows the cells as code spans (source lines, paths)

    def __post_init__(self) -> None:  # a title can be a name from a host (a GPU's)
        object.__setattr__(self, "title", literal(self.title))
        object.__setattr__(self, "sub", literal(self.sub))


@dataclass(frozen=True)
class Cell:
    text: str
    style: str = ""  # a rich style, used on a terminal only

    def __post_init__(self) -> None:  # one line, nothing raw, in every rendering
        object.__setattr__(self, "text", literal(self.text))


@dataclass(frozen=True)
class Table:
    columns: tuple[Column, ...]
    rows: tuple[tuple[Cell, ...], ...]
    keys: int = 1  # leading columns repeated in every part of a split table
    rule: bool = False  # a line of dashes under the header
    indent: str = ""
    title: str = field(default="")

    @property
    def has_sub(self) -> bool:
        return any(c.sub for c in self.columns)


def cells(*texts: str, style: str = "") -> tuple[Cell, ...]:
    """A row of cells of one style."""
    return tuple(Cell(t, style) for t in texts)


# What rich reads as a tag: "[" then a letter, '#', '/' or '@', up to the next "]" (rich.markup).
_TAG_LIKE = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")


def markup_escape(text: str) -> str:
    """``text`` shown literally by rich: what ``rich.markup.escape`` returns (a backslash before
    each tag-like "[...]", backslashes before it doubled), without importing rich, whose import
    is a tenth of a fast command's time when the output goes to a pipe."""
    text = _TAG_LIKE.sub(lambda m: m.group(1) * 2 + "\\" + m.group(2), text)
    if text.endswith("\\") and not text.endswith("\\\\"):
        return text + "\\"
    return text


def _markup(text: str, style: str, styled: bool) -> str:
    if not styled:
        return text
    escaped = markup_escape(text)
    return f"[{style}]{escaped}[/]" if style and text else escaped


def _pad(text: str, width: int, align: str) -> str:
    if align == "right":
        return " " * (width - len(text))
    if align == "center":
        return " " * ((width - len(text)) // 2)
    return ""


def _line(
    texts: Sequence[tuple[str, str]], widths: Sequence[int], aligns: Sequence[str], styled: bool
) -> str:
    parts = []
    for (text, style), width, align in zip(texts, widths, aligns, strict=True):
        before = _pad(text, width, align)
        after = " " * (width - len(text) - len(before))
        parts.append(before + _markup(text, style, styled) + after)
    return GAP.join(parts).rstrip()


def _widths(table: Table) -> list[int]:
    widths = [max(len(c.title), len(c.sub)) for c in table.columns]
    for row in table.rows:
        widths = [max(w, len(cell.text)) for w, cell in zip(widths, row, strict=True)]
    return widths


def split_columns(
    widths: Sequence[int], keys: int, width: int | None, indent: int = 0
) -> list[list[int]]:
    """Column indexes of each part: the keys, then as many further columns as fit ``width``."""
    rest = list(range(keys, len(widths)))
    if width is None or not rest:
        return [list(range(len(widths)))]
    base = indent + sum(widths[:keys]) + len(GAP) * keys
    parts: list[list[int]] = []
    current: list[int] = []
    used = base
    for i in rest:
        if current and used + widths[i] > width:
            parts.append(current)
            current, used = [], base
        current.append(i)
        used += widths[i] + len(GAP)
    parts.append(current)
    return [list(range(keys)) + part for part in parts]


def _too_narrow(table: Table, widths: list[int], width: int | None) -> bool:
    """Whether the key columns and the widest other one do not fit on a line of ``width``."""
    if width is None or len(widths) <= table.keys:
        return False
    keys = sum(widths[: table.keys]) + len(GAP) * table.keys + len(table.indent)
    return keys + max(widths[table.keys :]) > width


def text_lines(table: Table, width: int | None = None, styled: bool = False) -> list[str]:
    """The table as aligned lines (rich markup when ``styled``); split to fit ``width``, or one
    record per row when even the key columns and one more do not fit."""
    widths = _widths(table)
    if _too_narrow(table, widths, width):
        return record_lines(table, styled, width)
    lines: list[str] = []
    for n, part in enumerate(split_columns(widths, table.keys, width, len(table.indent))):
        if n:
            lines.append("")
        w = [widths[i] for i in part]
        aligns = [table.columns[i].align for i in part]
        bold = "bold" if styled else ""
        lines.append(
            table.indent + _line([(table.columns[i].title, bold) for i in part], w, aligns, styled)
        )
        if table.has_sub:
            lines.append(
                table.indent
                + _line([(table.columns[i].sub, bold) for i in part], w, aligns, styled)
            )
        if table.rule:
            lines.append(table.indent + GAP.join("-" * x for x in w))
        for row in table.rows:
            lines.append(
                table.indent + _line([(row[i].text, row[i].style) for i in part], w, aligns, styled)
            )
    return lines


def record_lines(table: Table, styled: bool = False, width: int | None = None) -> list[str]:
    """One record per row: the key cells on a line (on lines of their own when that is wider than
    ``width``), then one indented line per other column."""
    labels = [_heading(c) for c in table.columns[table.keys :]]
    label_width = max((len(label) for label in labels), default=0)
    lines: list[str] = []
    for row in table.rows:
        keys = row[: table.keys]
        first = _markup(keys[0].text, "bold" if styled else "", styled)
        more = [c for c in keys[1:] if c.text]
        one_line = len(table.indent) + sum(len(c.text) + len(GAP) for c in keys)
        if width is None or one_line <= width:
            lines.append(
                table.indent + first + "".join(GAP + _markup(c.text, c.style, styled) for c in more)
            )
        else:
            lines.append(table.indent + first)
            lines += [f"{table.indent}{GAP}{_markup(c.text, c.style, styled)}" for c in more]
        for label, cell in zip(labels, row[table.keys :], strict=True):
            name = _markup(label.ljust(label_width), "dim", styled)
            lines.append(f"{table.indent}{GAP}{name}{GAP}{_markup(cell.text, cell.style, styled)}")
    return lines


def _heading(column: Column) -> str:
    return f"{column.title} ({column.sub})" if column.sub else column.title


def markdown_escape(text: str) -> str:
    """Text safe inside a Markdown table cell (GitHub flavour): pipes, markup characters and
    control characters made visible (one line)."""
    out = literal(text).replace("\\", "\\\\")
    for ch in "|`*_[]<>#":
        out = out.replace(ch, "\\" + ch)
    return out


def markdown_lines(table: Table) -> list[str]:
    """A GitHub-flavoured Markdown table."""
    aligns = {"left": "---", "right": "---:", "center": ":---:"}
    head = [markdown_escape(_heading(c)) or " " for c in table.columns]
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "|".join(aligns[c.align] for c in table.columns) + "|",
    ]
    for row in table.rows:
        texts = [
            markdown_code(c.text) if column.code else markdown_escape(c.text)
            for c, column in zip(row, table.columns, strict=True)
        ]
        lines.append("| " + " | ".join(texts) + " |")
    return lines


def markdown_code(text: str) -> str:
    """A code span inside a table cell: only the pipe needs escaping (GitHub flavour); a
    backtick in the text takes a longer fence."""
    if not text:
        return ""
    body = literal(text).replace("|", "\\|")
    fence = "``" if "`" in body else "`"
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def csv_text(table: Table) -> str:
    """The table as CSV (RFC 4180 quoting, one header row), every cell ``spreadsheet_safe``."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([spreadsheet_safe(_heading(c)) for c in table.columns])
    writer.writerows([spreadsheet_safe(c.text) for c in row] for row in table.rows)
    return buffer.getvalue()


# What makes a spreadsheet read a cell as a formula (CWE-1236): OWASP's first characters.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def spreadsheet_safe(text: str) -> str:
    """A cell no spreadsheet runs: one that starts like a formula gets OWASP's leading ``'``
    (shown as text, the quote hidden). A plain number (``-3``, ``+1.5e3``) keeps its value: it
    can be nothing but a number."""
    if text.startswith(FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


# How each verdict is shown on a terminal (scan, fleet).
VERDICT_STYLE = {
    "native": "green",
    "jit": "yellow",
    "partial": "dark_orange",
    "none": "bold red",
    "blocked": "red",
    "unknown": "magenta",
    "no-kernels": "dim",
}
