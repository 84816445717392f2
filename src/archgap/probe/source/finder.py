"""The walk behind ``trace``: the statements around each textual hit of a name, read as code.

Python 3.8 standard library only (part of the probe). ``Finder`` visits the parsed block around
each hit and records every write and read of the traced name (``Matcher``) with its scope, the
conditions it sits under (``Guard``, from ``branches``) and the ``try`` statements around it.
"""

from __future__ import annotations

import ast
import bisect
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple, Union

from ..facts import Guard
from .files import word_pattern
from .flow import AST_INDEX, MUTATORS, dotted, string_value
from .sourcefile import SourceFile

# One block of a compound statement: its guard, the test node it reads, its statements.
Block = Tuple[Guard, Optional[ast.AST], List[ast.stmt]]


def branches(src: SourceFile, stmt: ast.stmt) -> List[Block]:
    """(guard, test node, body) of each block a compound statement holds; [] for the others.

    The test node is what the block's condition reads: an if/while test (for its else too) or a
    for loop's iterable; None for a for's else and the parts of a try.
    """
    if isinstance(stmt, (ast.If, ast.While)):
        text = src.segment(stmt.test)
        kind = "if" if isinstance(stmt, ast.If) else "while"
        return [
            (Guard(kind, text, stmt.lineno), stmt.test, stmt.body),
            (Guard("else", text, stmt.lineno), stmt.test, stmt.orelse),
        ]
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        text = "%s in %s" % (src.segment(stmt.target), src.segment(stmt.iter))
        return [
            (Guard("for", text, stmt.lineno), stmt.iter, stmt.body),
            (Guard("else", text, stmt.lineno), None, stmt.orelse),
        ]
    if isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
        node: ast.Try = stmt  # type: ignore[assignment]
        out: List[Block] = [(Guard("try", "", stmt.lineno), None, node.body)]
        for handler in node.handlers:
            text = src.segment(handler.type) if handler.type is not None else ""
            out.append((Guard("except", text, handler.lineno), None, handler.body))
        out.append((Guard("try-else", "", stmt.lineno), None, node.orelse))
        out.append((Guard("finally", "", stmt.lineno), None, node.finalbody))
        return out
    return []


def _is_identifier_path(name: str) -> bool:
    return all(part.isidentifier() for part in name.split("."))


@dataclass(frozen=True)
class Found:
    kind: str
    form: str
    path: str
    module: str
    line: int
    scope: Tuple[str, ...]
    guards: Tuple[Guard, ...]
    trys: Tuple[ast.Try, ...]
    function: Optional[ast.AST]  # the innermost def (or the top-level statement) around it


class Matcher:
    def __init__(self, name: str) -> None:
        self.name = name
        self.identifier = _is_identifier_path(name)
        self.last = name.rsplit(".", 1)[-1] if self.identifier else name
        self.dotted = self.identifier and "." in name
        self.word = word_pattern(self.last)

    def node(self, node: ast.AST) -> bool:
        """A Name/Attribute (or string-keyed subscript) that is the traced name."""
        if isinstance(node, ast.Name):
            return not self.dotted and node.id == self.last
        if isinstance(node, ast.Attribute):
            if node.attr != self.last:
                return False
            return not self.dotted or (dotted(node) or "").endswith(self.name)
        if isinstance(node, ast.Subscript):
            return string_value(node.slice) == self.name
        return False


class Finder:
    """Walks one parsed block, recording occurrences with scope, guards and enclosing trys."""

    def __init__(self, matcher: Matcher, src: SourceFile, module: str, hits: List[int]) -> None:
        self.m = matcher
        self.src = src
        self.module = module
        self.hits = hits  # sorted line numbers with a textual hit: other statements are skipped
        self.found: List[Found] = []
        self.handled: set = set()  # type: ignore[type-arg]

    def record(self, kind: str, form: str, line: int, ctx: Tuple[Any, ...]) -> None:
        scope, guards, trys, function = ctx
        self.found.append(
            Found(kind, form, self.src.path, self.module, line, scope, guards, trys, function)
        )

    def body(
        self,
        stmts: List[ast.stmt],
        scope: Tuple[str, ...],
        guards: Tuple[Guard, ...],
        trys: Tuple[ast.Try, ...],
        function: Optional[ast.AST],
    ) -> None:
        for stmt in stmts:
            if isinstance(stmt, ast.Expr) and string_value(stmt.value) is not None:
                continue  # a docstring or a bare string used as a comment: not code
            first = stmt.lineno
            for decorator in getattr(stmt, "decorator_list", ()):
                first = min(first, decorator.lineno)
            position = bisect.bisect_left(self.hits, first)
            if position == len(self.hits) or self.hits[position] > (stmt.end_lineno or first):
                continue  # no hit inside this statement
            owner = function if function is not None else stmt
            self.stmt(stmt, (scope, guards, trys, owner))

    def stmt(self, node: ast.stmt, ctx: Tuple[Any, ...]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.definition(node, ctx)
            return
        blocks = branches(self.src, node)
        if blocks:
            self.branching(node, blocks, ctx)
            return
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self.expr(item.context_expr, ctx)
                if item.optional_vars is not None:
                    self.target(item.optional_vars, "with", ctx)
            scope, guards, trys, function = ctx
            self.body(node.body, scope, guards, trys, function)
            return
        if self.assignment(node, ctx) or self.binding(node, ctx):
            return
        # Anything else (return, raise, expression statements, match, assert ...): its parts.
        self.generic(node, ctx)

    def definition(
        self,
        node: Union[ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef],
        ctx: Tuple[Any, ...],
    ) -> None:
        """A def or class: its name is a write; decorators, bases, arguments are read here,
        and its body is walked in its own scope."""
        scope = ctx[0]
        if node.name == self.m.last and not self.m.dotted:
            form = "class" if isinstance(node, ast.ClassDef) else "def"
            self.record("write", form, node.lineno, ctx)
        for decorator in node.decorator_list:
            self.expr(decorator, ctx)
        if isinstance(node, ast.ClassDef):
            for base in list(node.bases) + [k.value for k in node.keywords]:
                self.expr(base, ctx)
            self.body(node.body, (*scope, node.name), (), (), None)
        else:
            self.arguments(node.args, ctx)
            if node.returns is not None:
                self.expr(node.returns, ctx)
            self.body(node.body, (*scope, node.name), (), (), node)

    def branching(self, node: ast.stmt, blocks: List[Block], ctx: Tuple[Any, ...]) -> None:
        """if/while/for/try: the test or loop target, then each block under its guard."""
        scope, guards, trys, function = ctx
        if isinstance(node, (ast.If, ast.While)):
            self.expr(node.test, ctx)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self.target(node.target, "for", ctx)
            self.expr(node.iter, ctx)
        handlers = iter(getattr(node, "handlers", ()))
        for guard, _, block in blocks:
            if guard.kind == "except":
                handler = next(handlers)
                if handler.type is not None:
                    self.expr(handler.type, ctx)
                if handler.name == self.m.last and not self.m.dotted:
                    self.record("write", "except-as", handler.lineno, ctx)
            inner = (*trys, node) if guard.kind == "try" else trys
            self.body(block, scope, (*guards, guard), inner, function)

    def assignment(self, node: ast.stmt, ctx: Tuple[Any, ...]) -> bool:
        """=, op= and annotated assignment: the targets are writes, the values reads.
        False when ``node`` is none of them."""
        if isinstance(node, ast.Assign):
            for target in node.targets:
                self.target(target, "assign", ctx)
            self.expr(node.value, ctx)
        elif isinstance(node, ast.AugAssign):
            self.target(node.target, "augassign", ctx)
            self.expr(node.value, ctx)
        elif isinstance(node, ast.AnnAssign):
            self.target(node.target, "annassign", ctx)
            self.expr(node.annotation, ctx)
            if node.value is not None:
                self.expr(node.value, ctx)
        else:
            return False
        return True

    def binding(self, node: ast.stmt, ctx: Tuple[Any, ...]) -> bool:
        """del, global/nonlocal and imports bind (or unbind) names. False when ``node`` is
        none of them."""
        if isinstance(node, ast.Delete):
            for target in node.targets:
                self.target(target, "del", ctx)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            if self.m.last in node.names and not self.m.dotted:
                self.record("write", "global", self.line_of(node, self.m.last), ctx)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self.imports(node, ctx)
        else:
            return False
        return True

    def generic(self, node: ast.AST, ctx: Tuple[Any, ...]) -> None:
        """The parts of a node: statements, expressions, and the nodes that are neither."""
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                self.stmt(child, ctx)
            elif isinstance(child, ast.expr):
                self.expr(child, ctx)
            else:
                self.generic(child, ctx)

    def arguments(self, args: ast.arguments, ctx: Tuple[Any, ...]) -> None:
        every = list(getattr(args, "posonlyargs", [])) + list(args.args) + list(args.kwonlyargs)
        every += [a for a in (args.vararg, args.kwarg) if a is not None]
        for arg in every:
            if arg.arg == self.m.last and not self.m.dotted:
                self.record("write", "parameter", arg.lineno, ctx)
            if arg.annotation is not None:
                self.expr(arg.annotation, ctx)
        for default in list(args.defaults) + [d for d in args.kw_defaults if d is not None]:
            self.expr(default, ctx)

    def imports(self, node: ast.AST, ctx: Tuple[Any, ...]) -> None:
        last = self.m.last
        module = getattr(node, "module", None)
        if module and (self.m.name == module or last in module.split(".")):
            self.record("read", "import-from", self.line_of(node, last), ctx)
        for alias in node.names:  # type: ignore[attr-defined]
            bound = alias.asname or (
                alias.name if isinstance(node, ast.ImportFrom) else alias.name.split(".")[0]
            )
            parts = alias.name.split(".")
            if (bound == last and not self.m.dotted) or (
                self.m.dotted and alias.name == self.m.name
            ):
                self.record("write", "import", self.line_of(node, last), ctx)
            elif last in parts:
                self.record("read", "import", self.line_of(node, last), ctx)

    def line_of(self, node: ast.AST, word: str) -> int:
        """The line of ``word`` inside a multi-line statement (aliases lack positions in 3.8)."""
        start: int = getattr(node, "lineno", 1)
        end = getattr(node, "end_lineno", start) or start
        for number in range(start, end + 1):
            if self.m.word.search(self.src.lines[number - 1]):
                return number
        return start

    def target(self, node: ast.AST, form: str, ctx: Tuple[Any, ...]) -> None:
        """A binding target: Name/Attribute/Subscript/Tuple/List/Starred."""
        if isinstance(node, (ast.Tuple, ast.List)):
            inner = "unpack" if form in ("assign", "annassign", "with") else form
            for element in node.elts:
                self.target(element, inner, ctx)
            return
        if isinstance(node, ast.Starred):
            self.target(node.value, form, ctx)
            return
        if self.m.node(node) and not isinstance(node, ast.Subscript):
            line = getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]
            self.record("write", form, line, ctx)
            if isinstance(node, ast.Attribute):
                self.expr(node.value, ctx)
            return
        if isinstance(node, ast.Subscript):
            self._subscript_target(node, form, ctx)
            return
        if isinstance(node, ast.Attribute):
            if self.m.node(node.value):  # NAME.attr = v mutates NAME
                form = "del" if form == "del" else "attribute-assign"
                self.record("write", form, self._line(node.value), ctx)
                self.handled.add(id(node.value))
            self.expr(node.value, ctx)
            return
        self.expr(node, ctx)

    def _subscript_target(self, node: ast.Subscript, form: str, ctx: Tuple[Any, ...]) -> None:
        """``X[k] = v`` (or ``del X[k]``): a write of NAME when X is it or k is its string."""
        subform = "del" if form == "del" else "subscript-assign"
        if self.m.node(node.value):  # NAME[k] = v mutates NAME
            self.record("write", subform, self._line(node.value), ctx)
            self.handled.add(id(node.value))
        if string_value(node.slice) == self.m.name:  # d["NAME"] = v writes the key
            self.record("write", subform, node.lineno, ctx)
            self.handled.add(id(_unwrap(node.slice)))
        self.expr(node.value, ctx)
        self.expr(node.slice, ctx)

    def expr(self, node: ast.AST, ctx: Tuple[Any, ...]) -> None:
        stack = [node]
        while stack:
            node = stack.pop()
            if id(node) in self.handled:
                stack.extend(ast.iter_child_nodes(node))
                continue
            if isinstance(node, ast.Call):
                self.call(node, ctx)
            elif isinstance(node, ast.NamedExpr):
                self.target(node.target, "walrus", ctx)
                stack.append(node.value)
                continue
            elif isinstance(node, ast.comprehension):
                self.target(node.target, "for", ctx)
                stack.append(node.iter)
                stack.extend(node.ifs)
                continue
            elif isinstance(node, ast.Lambda):
                self.arguments(node.args, ctx)
                stack.append(node.body)
                continue
            else:
                self._read(node, ctx)
            stack.extend(ast.iter_child_nodes(node))

    def _read(self, node: ast.AST, ctx: Tuple[Any, ...]) -> None:
        """A read of the name itself: the name or attribute, its string key, a string that
        mentions it, or a keyword argument of its last part."""
        if isinstance(node, (ast.Name, ast.Attribute)) and self.m.node(node):
            form = "name" if isinstance(node, ast.Name) else "attribute"
            self.record("read", form, self._line(node), ctx)
        elif isinstance(node, ast.Subscript) and string_value(node.slice) == self.m.name:
            self.record("read", "key", node.lineno, ctx)
            self.handled.add(id(_unwrap(node.slice)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            self.string(node, ctx)
        elif isinstance(node, ast.keyword) and node.arg == self.m.last:
            self.record("read", "keyword", self._line(node.value), ctx)

    def call(self, node: ast.Call, ctx: Tuple[Any, ...]) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in MUTATORS and self.m.node(func.value):
            self.record("write", "mutate:." + func.attr, self._line(func.value), ctx)
            self.handled.add(id(func.value))
        name = dotted(func)
        if (
            name in ("setattr", "delattr")
            and len(node.args) >= 2
            and string_value(node.args[1]) == self.m.last
        ):
            form = "setattr" if name == "setattr" else "del"
            self.record("write", form, node.lineno, ctx)
            self.handled.add(id(node.args[1]))
        if (
            isinstance(func, ast.Attribute)
            and func.attr in ("setdefault", "pop", "update")
            and node.args
            and string_value(node.args[0]) == self.m.name
        ):
            self.record("write", "mutate:." + func.attr, node.lineno, ctx)
            self.handled.add(id(node.args[0]))

    def string(self, node: ast.Constant, ctx: Tuple[Any, ...]) -> None:
        value = str(node.value)
        if value == self.m.name:
            self.record("read", "string-key", node.lineno, ctx)
            return
        if self.m.last not in value or not self.m.word.search(value):
            return
        end = getattr(node, "end_lineno", node.lineno) or node.lineno
        for number in range(node.lineno, end + 1):
            if self.m.word.search(self.src.lines[number - 1]):
                self.record("read", "string", number, ctx)

    @staticmethod
    def _line(node: ast.AST) -> int:
        line: int = getattr(node, "end_lineno", 0) or getattr(node, "lineno", 1)
        return line


def _unwrap(node: ast.AST) -> ast.AST:
    return node.value if isinstance(node, AST_INDEX) else node  # type: ignore[attr-defined]
