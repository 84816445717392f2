"""``code``: the raising statements a crash log points at, read in the examined environment.

Python 3.8 standard library only (part of the probe). A log's frames come from the machine that
crashed; their site-packages-relative paths are looked up in the examined interpreter's
site-packages and the distribution whose RECORD owns the file is named. Raise sites known by their
code text (the signatures' knowledge) are found by that text, so line numbers always come from the
installed version. For each site: the installed line, the enclosing function, the conditions it
sits under (outermost first), the names the innermost condition reads, and what those names are
bound from in the function (to follow them with ``trace``). Nothing is imported or written.
"""

from __future__ import annotations

import ast
import os
from dataclasses import asdict
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..environment.pyenv import canonical_name
from ..environment.system import System
from ..facts import Binding, CodeFacts, CodeSite, Distribution, Guard, Problem
from .finder import branches
from .flow import dotted
from .sourcefile import SourceFile

MAX_SITES = 32  # a request names a handful; a hostile one is cut here


def collect_code(system: System, params: Any) -> Dict[str, Any]:
    """Probe section "code": ``{"python": PATH|None, "frames": [{"path", "line", "code"}],
    "raise_sites": [{"distribution", "file", "code"}]}`` (paths relative to site-packages)."""
    from ..environment.pyenv import installed_distributions, interpreter_paths

    params = params if isinstance(params, dict) else {}
    _, _, site_packages, problem = interpreter_paths(system, params.get("python"))
    problems: List[Problem] = [problem] if problem else []
    dists, dist_problems = installed_distributions(site_packages)
    problems.extend(dist_problems)
    owners = _Owners(dists)
    sites: List[CodeSite] = []
    for frame in _dicts(params.get("frames"))[:MAX_SITES]:
        relpath = _relative(frame.get("path"))
        line = frame.get("line")
        if relpath and isinstance(line, int):
            sites.append(_frame_site(site_packages, owners, relpath, line, str(frame.get("code"))))
    for wanted in _dicts(params.get("raise_sites"))[:MAX_SITES]:
        relpath = _relative(wanted.get("file"))
        code = str(wanted.get("code") or "")
        if relpath and code:
            dist = owners.named(str(wanted.get("distribution") or ""))
            sites.append(_known_site(dist, relpath, code))
    return asdict(CodeFacts(tuple(site_packages), tuple(sites), tuple(problems)))


def _dicts(value: Any) -> List[Dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _relative(value: Any) -> str:
    """A clean site-packages-relative path, or "" (no absolute paths, no climbing out)."""
    text = str(value or "").replace("\\", "/")
    parts = [p for p in text.split("/") if p and p != "."]
    if text.startswith("/") or ".." in parts or not text.endswith(".py"):
        return ""
    return "/".join(parts)


class _Owners:
    """Which distribution owns a site-packages file, from RECORDs read on first need."""

    def __init__(self, dists: Sequence[Distribution]) -> None:
        self.dists = dists
        self.records: Dict[str, frozenset] = {}  # type: ignore[type-arg]

    def of(self, path: str) -> Optional[Distribution]:
        from ..environment.pyenv import record_files

        path = os.path.normpath(path)
        for dist in self.dists:
            if dist.dist_info not in self.records:
                try:
                    self.records[dist.dist_info] = frozenset(record_files(dist.dist_info))
                except OSError:
                    self.records[dist.dist_info] = frozenset()
            if path in self.records[dist.dist_info]:
                return dist
        return None

    def named(self, name: str) -> Optional[Distribution]:
        wanted = canonical_name(name)
        return next((d for d in self.dists if canonical_name(d.name) == wanted), None)


def _missing(relpath: str, line: int, code: str, why: str, dist: Any = None) -> CodeSite:
    name, version = (dist.name, dist.version) if dist is not None else ("", "")
    return CodeSite(relpath, line, code, name, version, "", 0, "", "", (), (), (), why)


def _frame_site(
    site_packages: Sequence[str], owners: _Owners, relpath: str, line: int, code: str
) -> CodeSite:
    """A log frame: the same relative path here; the log's code text found if the line moved."""
    path = next(
        (p for p in (os.path.join(s, relpath) for s in site_packages) if os.path.isfile(p)), ""
    )
    if not path:
        return _missing(relpath, line, code, "not installed in the examined environment")
    dist = owners.of(path)
    src, reason = SourceFile.load(path)
    if src is None:
        return _missing(relpath, line, code, reason, dist)
    found = line
    wanted = code.strip()
    if wanted and src.line(line) != wanted:
        found = next((i + 1 for i, text in enumerate(src.lines) if text.strip() == wanted), 0)
        if not found:
            why = "the installed line %d reads %r, not %r" % (line, src.line(line), wanted)
            return _missing(relpath, line, code, why, dist)
    return _site(src, relpath, line, code, dist, found)


def _known_site(dist: Optional[Distribution], relpath: str, code: str) -> CodeSite:
    """A raise site known by its code text, in the named distribution's installed version."""
    if dist is None:
        return _missing(relpath, 0, code, "distribution not installed")
    path = os.path.join(os.path.dirname(dist.dist_info), relpath)
    src, reason = SourceFile.load(path)
    if src is None:
        return _missing(relpath, 0, code, reason, dist)
    found = next((i + 1 for i, text in enumerate(src.lines) if code in text), 0)
    if not found:
        return _missing(relpath, 0, code, "code text not found in %s" % path, dist)
    return _site(src, relpath, 0, code, dist, found)


def _site(
    src: SourceFile,
    relpath: str,
    requested: int,
    code: str,
    dist: Optional[Distribution],
    line: int,
) -> CodeSite:
    name, version = (dist.name, dist.version) if dist is not None else ("", "")
    pieces, error = src.pieces([line])
    located = None
    for stmts, scope in pieces:
        located = _locate(src, stmts, line, (), (), scope, None)
        if located is not None:
            break
    if located is None:
        why = error or "no statement at line %d" % line
        text = src.line(line)
        return CodeSite(
            relpath, requested, code, name, version, src.path, line, text, "", (), (), (), why
        )
    statement, guards, tests, scope, function = located
    if not requested:  # found by its code text: the statement's first line is the raising one
        line = statement.lineno
    condition = next(
        (t for g, t in zip(reversed(guards), reversed(tests)) if g.kind in ("if", "else", "while")),
        None,
    )
    reads = _names(condition) if condition is not None else ()
    bindings = _bindings(src, function, reads) if function is not None else ()
    return CodeSite(
        relpath,
        requested,
        code,
        name,
        version,
        src.path,
        line,
        src.line(line),
        ".".join(scope) or "<module>",
        guards,
        reads,
        bindings,
    )


_Located = Tuple[
    ast.stmt, Tuple[Guard, ...], Tuple[Optional[ast.AST], ...], Tuple[str, ...], Optional[ast.AST]
]


def _locate(
    src: SourceFile,
    body: Sequence[ast.stmt],
    line: int,
    guards: Tuple[Guard, ...],
    tests: Tuple[Optional[ast.AST], ...],
    scope: Tuple[str, ...],
    function: Optional[ast.AST],
) -> Optional[_Located]:
    """The innermost statement holding ``line``, its guards (and their test nodes), scope and
    enclosing function."""
    for stmt in body:
        if not stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            owner = function if isinstance(stmt, ast.ClassDef) else stmt
            inner = _locate(src, stmt.body, line, (), (), (*scope, stmt.name), owner)
            return inner or (stmt, guards, tests, scope, function)
        for guard, test, sub in branches(src, stmt):
            found = _locate(src, sub, line, (*guards, guard), (*tests, test), scope, function)
            if found is not None:
                return found
        inner_body = (
            getattr(stmt, "body", None) if isinstance(stmt, (ast.With, ast.AsyncWith)) else None
        )
        if inner_body:
            found = _locate(src, inner_body, line, guards, tests, scope, function)
            if found is not None:
                return found
        return stmt, guards, tests, scope, function
    return None


def _names(node: Optional[ast.AST]) -> Tuple[str, ...]:
    """Names and attribute names an expression reads, in source order, once each."""
    if node is None:
        return ()
    found: List[Tuple[int, int, str]] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.append((sub.lineno, sub.col_offset, sub.id))
        elif isinstance(sub, ast.Attribute):
            found.append((sub.lineno, getattr(sub, "end_col_offset", 0) or 0, sub.attr))
    ordered = [name for _, _, name in sorted(found)]
    return tuple(dict.fromkeys(ordered))


def _bindings(src: SourceFile, function: ast.AST, names: Sequence[str]) -> Tuple[Binding, ...]:
    """Assignments to ``names`` in ``function``, with the loop each sits in."""
    wanted = set(names)
    loops: Dict[int, ast.AST] = {}  # id(assignment) -> the innermost for loop around it
    for node in ast.walk(function):
        if isinstance(node, (ast.For, ast.AsyncFor)):
            for sub in ast.walk(node):
                if sub is not node:
                    loops[id(sub)] = node  # inner loops are walked later and win
    out: List[Binding] = []
    for node in ast.walk(function):
        if not isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            name = dotted(target) or ""
            short = name.rsplit(".", 1)[-1]
            if short not in wanted:
                continue
            loop = loops.get(id(node))
            reads = list(_names(node.value)) if node.value is not None else []
            loop_text = ""
            if isinstance(loop, (ast.For, ast.AsyncFor)):
                loop_text = "%s in %s" % (src.segment(loop.target), src.segment(loop.iter))
                reads.extend(_names(loop.iter))
            out.append(
                Binding(
                    short,
                    node.lineno,
                    src.line(node.lineno),
                    loop_text,
                    tuple(dict.fromkeys(reads)),
                )
            )
    return tuple(sorted(out, key=lambda b: b.line))
