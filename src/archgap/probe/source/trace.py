"""``trace``: every place a name occurs as code, split into writes and reads, with what feeds them.

Python 3.8 standard library only (part of the probe). A bytes search finds the files that can
match; only the top-level block around each hit is parsed. For each write: the branch that guards
it, the environment variables that feed it (``flow.knobs``) and the broad ``except`` around
it that swallows errors (``flow.swallow``). Nothing is imported or written.
"""

from __future__ import annotations

import ast
import gc
import re
from dataclasses import asdict, replace
from functools import partial
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from ..environment.system import System
from ..facts import Knob, Occurrence, Problem, Swallow, TraceFacts
from .files import Candidates, candidate_work, line_numbers, module_name
from .finder import Finder, Found, Matcher
from .flow import Program, knobs, swallow
from .sourcefile import SourceFile

__all__ = [
    "collect_trace",
    "distribution_targets",
    "trace",
    "valid_name",
]

# A name to trace: an identifier, a dotted name, or a string key such as an env var or "a-b/c".
_NAME = re.compile(r"^[A-Za-z_][\w.\-/:]*$")

# Writes whose value is computed (knobs and swallowed errors are worth finding for these).
_VALUE_WRITES = (
    "assign",
    "augassign",
    "annassign",
    "unpack",
    "for",
    "with",
    "walrus",
    "subscript-assign",
    "attribute-assign",
    "setattr",
)


def valid_name(name: str) -> bool:
    return bool(_NAME.match(name)) and ".." not in name


def collect_trace(system: System, params: Any) -> Dict[str, Any]:
    """Probe section: ``{"name", "paths": [...], "dists": [...], "python": str|None}``."""
    name = str(params.get("name", ""))
    if not valid_name(name):
        return asdict(TraceFacts(name, (), 0, 0, (), (), (), "not a traceable name: %r" % name))
    groups, problems, error = distribution_targets(
        system, params.get("paths") or (), params.get("dists") or (), params.get("python")
    )
    labels = tuple(label for label, _ in groups)
    if error:
        return asdict(TraceFacts(name, labels, 0, 0, (), (), tuple(problems), error))
    facts = trace(name, [p for _, group in groups for p in group])
    return asdict(replace(facts, roots=labels, problems=tuple(problems) + facts.problems))


def distribution_targets(
    system: System, paths: Sequence[str], dists: Sequence[str], python: Optional[str]
) -> Tuple[List[Tuple[str, List[str]]], List[Problem], Optional[str]]:
    """(label, paths) groups: each given path, each distribution's .py files (from its RECORD),
    or, with neither, the interpreter's site-packages; plus problems, and an error for an
    unknown distribution or an interpreter that cannot be asked."""
    groups: List[Tuple[str, List[str]]] = [(p, [p]) for p in paths]
    if paths and not dists:
        return groups, [], None
    from ..environment.pyenv import (
        canonical_name,
        installed_distributions,
        interpreter_paths,
        record_files,
    )

    executable, _, site_packages, problem = interpreter_paths(system, python)
    problems = [problem] if problem else []
    if problem is not None and not site_packages:
        return [], problems, problem.reason
    if not dists:
        return [(site, [site]) for site in site_packages], problems, None
    installed, dist_problems = installed_distributions(site_packages)
    problems.extend(dist_problems)
    by_name = {canonical_name(d.name): d for d in installed}
    for wanted in dists:
        dist = by_name.get(canonical_name(wanted))
        if dist is None:
            return [], problems, unknown_distribution(wanted, installed, executable)
        try:
            files = [p for p in record_files(dist.dist_info) if p.endswith(".py")]
        except OSError as exc:
            problems.append(Problem(dist.dist_info, "unreadable RECORD: %s" % exc))
            files = []
        groups.append(("%s %s" % (dist.name, dist.version), files))
    return groups, problems, None


def unknown_distribution(wanted: str, installed: Sequence[Any], executable: str) -> str:
    """Why ``wanted`` was not found: the environment asked, the closest installed names, and
    how to name another environment."""
    import difflib

    from ..environment.pyenv import canonical_name

    names = {canonical_name(d.name): d.name for d in installed}
    key = canonical_name(wanted)
    close = [n for n in names if n.startswith(key) or key.startswith(n)]
    close += difflib.get_close_matches(key, list(names), n=3, cutoff=0.6)
    close = list(dict.fromkeys(close))[:3]
    if close:
        hint = "did you mean %s?" % " or ".join(names[n] for n in close)
    else:
        hint = "none of its %d distributions has a close name" % len(names)
    return (
        "unknown distribution %r in the environment of %s (%s); --python PATH inspects "
        "another environment" % (wanted, executable, hint)
    )


def trace(name: str, paths: Sequence[str]) -> TraceFacts:
    """Every occurrence of ``name`` as code under ``paths``."""
    collecting = gc.isenabled()
    gc.disable()  # many short-lived AST nodes, no cycles: the collector only costs time here
    try:
        return _trace(name, paths)
    finally:
        if collecting:
            gc.enable()


def _trace(name: str, paths: Sequence[str]) -> TraceFacts:
    matcher = Matcher(name)
    needle = matcher.last.encode("utf-8")
    scanned, halves, problems = candidate_work(paths, [needle], partial(_occurrences, matcher))
    occurrences = [o for _, found, _ in halves for o in found]
    # Each candidate file gives at most one problem: in path order, as one process gave them.
    problems += sorted((p for _, _, more in halves for p in more), key=lambda p: p.subject)
    defining = _defining_files(occurrences)
    order = {path: i for i, path in enumerate(defining)}
    occurrences.sort(
        key=lambda o: (o.kind != "write", order.get(o.path, len(order)), o.path, o.line, o.form)
    )
    return TraceFacts(
        name,
        tuple(paths),
        scanned,
        sum(count for count, _, _ in halves),
        tuple(defining),
        tuple(occurrences),
        tuple(problems),
    )


def _occurrences(
    matcher: Matcher, candidates: Candidates
) -> Tuple[int, List[Occurrence], List[Problem]]:
    """(candidates, their occurrences, their problems): the work on one process's candidates."""
    init_cache: Dict[str, bool] = {}
    found: List[Found] = []
    sources: Dict[str, SourceFile] = {}
    problems: List[Problem] = []
    for path, data in sorted(candidates):
        src, reason = SourceFile.load(path, data)
        if src is None:
            problems.append(Problem(path, reason))
            continue
        hits = _hit_lines(src.text, matcher.last)
        if not hits:
            continue
        sources[path] = src
        module, _ = module_name(path, init_cache)
        finder = Finder(matcher, src, module, hits)
        try:
            error = _find_in_file(src, finder, hits)
        except RecursionError:
            error = "too deeply nested to analyse"
        if error:
            problems.append(Problem(path, error))
        found.extend(finder.found)
    return len(candidates), _analyse(found, sources), problems


def _hit_lines(text: str, word: str) -> List[int]:
    """1-based numbers of the lines where ``word`` occurs as a whole word (C-speed find)."""
    return line_numbers(text, _word_starts(text, word))


def _word_starts(text: str, word: str) -> Iterator[int]:
    position, size = 0, len(word)
    while True:
        position = text.find(word, position)
        if position < 0:
            return
        after = position + size
        if (position == 0 or not _is_word_char(text[position - 1])) and (
            after >= len(text) or not _is_word_char(text[after])
        ):
            yield position
        position = after


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _find_in_file(src: SourceFile, finder: Finder, hits: List[int]) -> str:
    """Visit what encloses each hit; returns why the file could not be analysed, or ""."""
    pieces, error = src.statement_pieces(hits)
    for stmts, scope, _ in pieces:
        finder.body(stmts, scope, (), (), None)
    return error


def _analyse(found: List[Found], sources: Dict[str, SourceFile]) -> List[Occurrence]:
    """Occurrences with the source line; writes get their knobs and swallowed exceptions."""
    program = Program()
    knob_cache: Dict[Tuple[str, int], Tuple[Knob, ...]] = {}
    swallow_cache: Dict[Tuple[str, int], Optional[Swallow]] = {}
    seen = set()
    out: List[Occurrence] = []
    for item in found:
        key = (item.kind, item.form, item.path, item.line)
        if key in seen:
            continue
        seen.add(key)
        src = sources[item.path]
        function = ".".join(item.scope) or "<module>"
        item_knobs: Tuple[Knob, ...] = ()
        swallowed: List[Swallow] = []
        if item.kind == "write" and item.form.startswith((*_VALUE_WRITES, "mutate")):
            info = program.info(item.path, src)
            owner = item.function
            if info is not None and item.scope:
                # A hit parsed as one statement of a function body: its function, whole.
                defined = info.defs.get(".".join(item.scope))
                if isinstance(defined, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    owner = defined
            if info is not None and owner is not None:
                qualname = _owner_qualname(item, owner)
                cache_key = (item.path, owner.lineno)  # type: ignore[attr-defined]
                if cache_key not in knob_cache:
                    knob_cache[cache_key] = knobs(program, info, qualname, owner)
                item_knobs = knob_cache[cache_key]
                for try_node in item.trys:
                    try_key = (item.path, try_node.lineno)
                    if try_key not in swallow_cache:
                        swallow_cache[try_key] = swallow(program, info, qualname, owner, try_node)
                    found_swallow = swallow_cache[try_key]
                    if found_swallow is not None:
                        swallowed.append(found_swallow)
        out.append(
            Occurrence(
                item.kind,
                item.form,
                item.path,
                item.module,
                item.line,
                function,
                src.line(item.line),
                item.guards,
                item_knobs,
                tuple(swallowed),
            )
        )
    return out


def _owner_qualname(item: Found, owner: ast.AST) -> str:
    if isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return ".".join(item.scope)
    return "<module>"


def _defining_files(occurrences: List[Occurrence]) -> List[str]:
    """Files that define the name: def/class or module-level binding, else ``__init__`` writes."""
    writes = [o for o in occurrences if o.kind == "write"]
    tiers = (
        [
            o
            for o in writes
            if o.form in ("def", "class")
            or (o.function == "<module>" and o.form in ("assign", "annassign", "unpack"))
        ],
        [o for o in writes if o.function.endswith("__init__")],
        writes,
    )
    for tier in tiers:
        if tier:
            return sorted({o.path for o in tier})
    return []
