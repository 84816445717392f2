"""One Python source file read without importing it: its lines as the compiler counts them, and
the smallest AST pieces around given lines, cut out by indentation and parsed on demand (the whole
module only when a piece cannot be cut out cleanly). Shared by ``trace``,
``gates``, ``flow`` and ``sites``.
"""

from __future__ import annotations

import ast
import re
from typing import Dict, List, Optional, Sequence, Tuple

from .files import _MAX_FILE_BYTES, decode_source, read_bytes

_KEYWORD_CONTINUATIONS = ("except", "else", "elif", "finally", "case")
# Empty lines parsed above a piece instead of renumbering its nodes: see SourceFile.parse_range.
_BLANK_LINES_PER_PIECE_LINE = 100
MAX_LINE_CHARS = 240  # a source line quoted in results (a knob, a hit) is cut to this


class SourceFile:
    """One candidate file: its lines, and its AST pieces parsed on demand."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        # Line numbers as the compiler counts them: only \n, \r\n and \r end a line.
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        self.text = text
        self.lines = text.split("\n")
        self._module: Optional[ast.Module] = None
        self._module_error: Optional[str] = None
        self._quotes = (0, 0, 0)  # (line, its offset, parity of """ and ''' before it)
        self._parents: Dict[int, int] = {}
        self._functions: Dict[int, Optional[Tuple[int, int, Tuple[str, ...]]]] = {}
        self._body_widths: Dict[int, List[int]] = {}

    @classmethod
    def load(cls, path: str, data: Optional[bytes] = None) -> Tuple[Optional[SourceFile], str]:
        """The file, or (None, reason) when it cannot be read or decoded."""
        try:
            raw = read_bytes(path) if data is None else data
        except OSError as exc:
            return None, "cannot read: %s" % (exc.strerror or exc)
        if len(raw) > _MAX_FILE_BYTES:
            return None, "larger than %d MiB: not parsed" % (_MAX_FILE_BYTES >> 20)
        try:
            return cls(path, decode_source(raw)), ""
        except (SyntaxError, LookupError, UnicodeDecodeError) as exc:
            return None, "cannot decode: %s" % exc

    def module(self) -> Tuple[Optional[ast.Module], str]:
        """The whole module's AST, or (None, why it does not parse)."""
        if self._module is None and self._module_error is None:
            self._module, self._module_error = parse(self.text)
        return self._module, self._module_error or ""

    def line(self, number: int) -> str:
        """A 1-based line, stripped, cut to MAX_LINE_CHARS (minified source has 60 KB lines)."""
        if 1 <= number <= len(self.lines):
            text = self.lines[number - 1].strip()
            return text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS] + " ..."
        return ""

    def segment(self, node: ast.AST) -> str:
        """The source text of a node (columns are UTF-8 byte offsets), on one line."""
        start = getattr(node, "lineno", None)
        end = getattr(node, "end_lineno", None)
        if start is None or end is None:
            return ""
        col = getattr(node, "col_offset", 0)
        end_col = getattr(node, "end_col_offset", None)
        if start == end:
            return _cut(self.lines[start - 1], col, end_col)
        parts = [_cut(self.lines[start - 1], col, None)]
        parts.extend(line.strip() for line in self.lines[start : end - 1])
        parts.append(_cut(self.lines[end - 1], 0, end_col).strip())
        return " ".join(p.strip() for p in parts if p.strip())

    def inside_triple_string(self, index: int) -> bool:
        """Whether line ``index`` (0-based) may start inside a triple-quoted string (odd count of
        either quote before it). Counted by C-speed searches from the line asked before (hits come
        in order), so a file costs one pass up to its last question."""
        line, offset, parity = self._quotes
        if index < line:
            line, offset, parity = 0, 0, 0
        end = offset + sum(map(len, self.lines[line:index])) + (index - line)
        counts = (self.text.count('"""', offset, end), self.text.count("'''", offset, end))
        parity ^= (counts[0] & 1) | ((counts[1] & 1) << 1)
        self._quotes = (index, end, parity)
        return parity != 0

    def parent(self, index: int) -> int:
        """The nearest line above ``index`` that is less indented (-1 for none): the indentation
        tree. Blank lines, comments and lines that start by closing a bracket (the end of a
        multi-line ``class X(...`` or ``def f(...`` header) are no one's parent.

        Found by walking up from the line, only as far as the answer (the first ``width``
        characters of a deeper line are blank: one C call per line), jumping from a line asked
        before to its parent: the lines between are deeper still.
        """
        known = self._parents
        found = known.get(index)
        if found is not None:
            return found
        lines = self.lines
        width = _indent(lines[index])
        j = index - 1 if width else -1  # nothing is less indented than column 0
        while j >= 0:
            line = lines[j]
            if line[:width].strip():  # less indented and not blank
                if line.lstrip()[0] not in "#)]}":
                    break
            elif j in known and line.strip():  # as deep or deeper: its parent is ours or below
                j = known[j]
                continue
            j -= 1
        known[index] = j
        return j

    def _previous_significant(self, index: int) -> int:
        j = index - 1
        while j >= 0 and (not self.lines[j].strip() or self.lines[j].lstrip().startswith("#")):
            j -= 1
        return j

    def enclosing_block(self, index: int) -> Tuple[int, int]:
        """[start, end) 0-based lines of the top-level statement that holds line ``index``."""
        lines = self.lines
        start = index
        while start > 0 and not _starts_statement(lines[start]):
            start -= 1
        start = self._decorated_from(start)
        return start, self._block_end(start, index)

    def _decorated_from(self, start: int) -> int:
        """Where the statement at ``start`` begins with its decorators: they belong to their
        def/class (walked up over, with their continuation lines)."""
        lines = self.lines
        probe = start - 1
        while probe >= 0:
            line = lines[probe]
            if line.startswith("@"):
                start = probe
            elif line and line[0] in ")]}":  # the end of a multi-line decorator?
                above = probe - 1
                while above >= 0 and not _starts_statement(lines[above]):
                    above -= 1
                if above < 0 or not lines[above].startswith("@"):
                    break
                start = probe = above
            elif line.strip() and not line.lstrip().startswith("#"):
                break
            probe -= 1
        return start

    def _block_end(self, start: int, index: int) -> int:
        """The end of the statement at ``start`` that holds line ``index``: the next statement,
        or for a hit on a decorator the end of the decorated def/class."""
        lines = self.lines
        end = index + 1
        in_decorators = lines[start].startswith("@") and not any(
            _is_def(line) for line in lines[start : index + 1]
        )
        while end < len(lines):
            line = lines[end]
            if _starts_statement(line):
                if not in_decorators:
                    break
                if _is_def(line):
                    in_decorators = False
                elif not line.startswith("@"):
                    break
            end += 1
        return end

    def enclosing_function(
        self, index: int, allow_top: bool = False
    ) -> Optional[Tuple[int, int, Tuple[str, ...]]]:
        """[start, end) lines and outer scope names of the indented def that holds line ``index``.

        None when the line is not inside an indented def (module level, a class body, or a def at
        column 0: ``enclosing_block`` covers those). Found by indentation (up the ``parent``
        chain, so each question costs the nesting depth), checked by parsing.
        """
        lines = self.lines
        j = self.parent(index) if lines[index].strip() else self._previous_significant(index)
        header = -1
        while j >= 0:
            stripped = lines[j].lstrip()
            if stripped.startswith(("def ", "async def ")):
                header = j
                break
            if stripped.startswith("class ") or len(lines[j]) == len(stripped):
                return None
            j = self.parent(j)
        if header < 0:
            return None
        if header not in self._functions:
            self._functions[header] = self._function_at(header)
        found = self._functions[header]
        if found is None or (_indent(lines[header]) == 0 and not allow_top):
            return None
        return found

    def _function_at(self, header: int) -> Optional[Tuple[int, int, Tuple[str, ...]]]:
        """[start, end) and outer scope names of the def on line ``header`` (None when it is
        nested in an if/try at module level: no column-0 class/def above it)."""
        lines = self.lines
        indent = _indent(lines[header])
        names: List[str] = []
        limit = indent
        j = self.parent(header)
        while j >= 0 and limit > 0:
            stripped = lines[j].lstrip()
            if stripped.startswith(("def ", "async def ", "class ")):
                names.append(_header_name(stripped))
                limit = len(lines[j]) - len(stripped)
            elif len(lines[j]) == len(stripped):
                break  # a column-0 statement that is no def or class
            j = self.parent(j)
        if limit > 0:
            return None
        start = header
        while start > 0 and lines[start - 1].lstrip().startswith("@"):
            start -= 1
        end = header + 1
        while end < len(lines):
            line = lines[end]
            stripped = line.lstrip()
            if (
                stripped
                and not stripped.startswith("#")
                and len(line) - len(stripped) <= indent
                and stripped[0] not in ")]}"
            ):
                break
            end += 1
        return start, end, tuple(reversed(names))

    def body_statement(self, index: int) -> Optional[Tuple[int, int, Tuple[str, ...], int]]:
        """[start, end), scope names (with the def) and the def line (1-based) of the statement
        of a function body that holds line ``index``: the smallest piece that still carries every
        branch around a hit inside a function. Found by indentation; ``parse_range`` checks it."""
        found = self.enclosing_function(index, allow_top=True)
        if found is None or not found[0] <= index < found[1]:
            return None
        lines = self.lines
        start, end, scope = found
        header = start
        while header < index and not _is_def(lines[header].lstrip()):
            header += 1
        if header >= index:
            return None
        body = self._body_width(header, end, index)
        if not body:
            return None
        first = index
        while first > header and not (
            _indent(lines[first]) == body and _starts_statement(lines[first][body:])
        ):
            first -= 1
        if first <= header:
            return None
        last = index + 1
        while last < end:
            line = lines[last]
            if line.strip() and _indent(line) <= body and _starts_statement(line[_indent(line) :]):
                break
            last += 1
        return first, last, (*scope, _header_name(lines[header].lstrip())), header + 1

    def _body_width(self, header: int, end: int, index: int) -> int:
        """The least indentation deeper than the def's among its lines up to ``index`` (0 for
        none); per def, a running minimum is built once, so each question is O(1)."""
        widths = self._body_widths.get(header)
        if widths is None:
            outer = _indent(self.lines[header])
            widths, least = [], 0
            for line in self.lines[header + 1 : end]:
                stripped = line.lstrip()
                if stripped and not stripped.startswith(("#", ")", "]", "}")):
                    width = len(line) - len(stripped)
                    if width > outer and (not least or width < least):
                        least = width
                widths.append(least)
            self._body_widths[header] = widths
        at = index - header - 1
        return widths[at] if 0 <= at < len(widths) else 0

    def pieces(
        self, hits: Sequence[int]
    ) -> Tuple[List[Tuple[List[ast.stmt], Tuple[str, ...]]], str]:
        """(statements, outer scope names) that together enclose every hit line (1-based): each
        hit's indented def, else its top-level statement, else the whole module."""
        found, error = self.statement_pieces(hits, statements=False)
        return [(stmts, scope) for stmts, scope, _ in found], error

    def statement_pieces(
        self, hits: Sequence[int], statements: bool = True
    ) -> Tuple[List[Tuple[List[ast.stmt], Tuple[str, ...], int]], str]:
        """(statements, scope names, def line or 0) that together enclose every hit line.

        With ``statements`` a hit inside a function is parsed as the one statement of the
        function body that holds it (scope names then end with the function's, and the def line
        is given); the pieces are smaller, and still carry every branch around the hit.

        Each hit's indented def is parsed on its own, else its top-level statement; when one of
        them does not parse on its own the whole module is the only piece. Returns the pieces and
        why the file cannot be parsed at all ("" when it can).
        """
        pieces: List[Tuple[List[ast.stmt], Tuple[str, ...], int]] = []
        covered = bytearray(len(self.lines) + 1)  # lines inside a piece already found: O(1) test
        for number in hits:
            index = number - 1
            if 0 <= index < len(covered) and covered[index]:
                continue
            statement = self.body_statement(index) if statements else None
            if statement is not None:
                start, end, scope, def_line = statement
                body = self._indented_body(start, end)
                if body is not None:
                    covered[start:end] = b"\1" * (end - start)
                    pieces.append((body, scope, def_line))
                    continue
            function = self.enclosing_function(index)
            # A continuation line's indentation can mislead the search: the def must hold the hit.
            if function is not None and function[0] <= index < function[1]:
                start, end, scope = function
                body = self._indented_body(start, end)
                if body is not None:
                    covered[start:end] = b"\1" * (end - start)
                    pieces.append((body, scope, 0))
                    continue
            start, end = self.enclosing_block(index)
            tree = self.parse_range(start, end, indented=False)
            if tree is not None:
                covered[start:end] = b"\1" * (end - start)
                pieces.append((tree.body, (), 0))
                continue
            module, error = self.module()
            return ([(module.body, (), 0)] if module is not None else []), error
        return pieces, ""

    def _indented_body(self, start: int, end: int) -> Optional[List[ast.stmt]]:
        """The statements of the indented lines [start, end) parsed on their own (under the
        ``if 1:`` header ``parse_range`` puts above them); None when they do not parse."""
        tree = self.parse_range(start, end, indented=True)
        if tree is not None and tree.body and isinstance(tree.body[0], ast.If):
            return tree.body[0].body
        return None

    def parse_range(self, start: int, end: int, indented: bool) -> Optional[ast.Module]:
        """Lines [start, end) parsed at their place in the file (line numbers as in the file).

        An indented block is parsed under an ``if 1:`` header on the line above it, so columns
        stay those of the file too. None when it does not parse on its own.
        """
        if start > 0 and self.inside_triple_string(start):
            return None
        if indented and start == 0:
            return None
        text = ("if 1:\n" if indented else "") + "\n".join(self.lines[start:end])
        shift = start - 1 if indented else start
        # Line numbers as in the file. Empty lines above the piece cost the tokenizer about a
        # hundredth of what renumbering a piece line's nodes costs: a short shift is parsed, a
        # long one (a piece far down a big file) renumbered, so no piece costs the file above it.
        if shift <= _BLANK_LINES_PER_PIECE_LINE * (end - start):
            text, shift = "\n" * shift + text, 0
        tree, _ = parse(text)
        if tree is not None and shift:
            for node in ast.walk(tree):
                if "lineno" in node._attributes:
                    node.lineno += shift  # type: ignore[attr-defined]
                    if getattr(node, "end_lineno", None) is not None:
                        node.end_lineno += shift  # type: ignore[attr-defined]
        return tree


def _starts_statement(line: str) -> bool:
    """A line that starts a new top-level statement (at column 0, not a continuation)."""
    if not line or line[0] in " \t#)]}\f":
        return False
    if line[0].isalpha():
        word = line.split(None, 1)[0].rstrip(":")
        if word in _KEYWORD_CONTINUATIONS:
            return False
    return True


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _header_name(stripped: str) -> str:
    """The name in ``def name(``, ``async def name(`` or ``class name:``."""
    words = stripped.split(None, 2)
    rest = words[2] if words[0] == "async" and len(words) > 2 else " ".join(words[1:])
    return re.split(r"[(:\s\[]", rest, maxsplit=1)[0]


def _is_def(line: str) -> bool:
    return line.startswith(("def ", "async def ", "class "))


def _cut(line: str, start: int, end: Optional[int]) -> str:
    if line.isascii():
        return line[start:end]
    raw = line.encode("utf-8")
    return raw[start:end].decode("utf-8", "replace")


def parse(text: str) -> Tuple[Optional[ast.Module], str]:
    try:
        return ast.parse(text), ""
    except SyntaxError as exc:
        return None, "does not parse: %s (line %s)" % (exc.msg, exc.lineno)
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
        return None, "does not parse: %s" % (exc,)
