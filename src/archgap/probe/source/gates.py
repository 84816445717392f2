"""``gates``: the code in a package that detects or gates GPU architectures, grouped by function.

Python 3.8 standard library only (part of the probe). Finds capability queries
(``get_device_capability``, ``get_arch_list``, ``cudaGetDeviceProperties``, NVML compute
capability), comparisons on major/minor/capability/sm numbers, ``*ARCH*`` environment reads, and
raises, asserts and warnings whose message names an SM, a compute capability, an architecture or
a CUDA version; each with the branch conditions it sits under. Nothing is imported.
"""

from __future__ import annotations

import ast
import bisect
import gc
import re
from dataclasses import asdict
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..environment.system import System
from ..facts import Gate, GateFunction, GatesFacts, GatesTarget, Guard, Problem
from .files import line_numbers, module_name, python_files
from .flow import dotted, env_reads, raise_parts, string_value
from .sourcefile import SourceFile
from .trace import distribution_targets

# Calls that read what the GPU is (last dotted component -> kind).
CAPABILITY_CALLS = {
    "get_device_capability": "capability-call",
    "has_device_capability": "capability-call",
    "is_device_capability": "capability-call",
    "cuDeviceComputeCapability": "capability-call",
    "nvmlDeviceGetCudaComputeCapability": "nvml-call",
    "get_arch_list": "arch-list-call",
    "_get_cuda_arch_flags": "arch-list-call",
    "get_device_properties": "device-properties-call",
    "cudaGetDeviceProperties": "device-properties-call",
    "cuDeviceGetAttribute": "device-properties-call",
    "cudaDeviceGetAttribute": "device-properties-call",
}
_WARN_CALLS = ("warn", "warning", "warning_once", "warn_once")
# Identifier words that make a comparison an architecture comparison.
_ARCH_WORDS = frozenset(("major", "minor", "capability", "cc", "sm", "arch", "archs", "compute"))
# Words that make an identifier a count or a shape, not an architecture (sm_count, row_major,
# num_major_elements): with them, an architecture word does not count.
_SHAPE_WORDS = frozenset(
    (
        "count", "num", "elements", "size", "sizes", "dim", "dims", "stride", "strides", "axis",
        "idx", "index", "order", "row", "col", "layout", "tile", "block", "blocks", "threads",
        "warps", "bytes", "mem", "smem", "len", "length", "offset", "ids",
    )
)  # fmt: skip
# A message about an architecture, an SM, a compute capability or a CUDA version.
ARCH_MESSAGE = re.compile(
    r"\bsm_?(?:\d|\{|%)|\bsm ?\d|compute capabilit|\bcapabilit|architecture"
    r"|\barchs?\b|cuda\s*(version|toolkit|>=|>|<=|<|==|\d)|\bblackwell\b|\bhopper\b|\bampere\b",
    re.IGNORECASE,
)
# Lines worth looking at: every gate has one of these on one of its lines (searched in the
# lowercased text). Files without any are not parsed; statements without any are not walked.
# Separate patterns with a literal start: Python's regex engine scans for those at C speed.
_TRIGGERS = tuple(
    re.compile(p)
    for p in (
        "capabilit",
        "arch",
        "major",
        "minor",
        "blackwell",
        "hopper",
        "ampere",
        "device(?:properties|getattribute)",
        r"cuda\s*(?:version|toolkit|[<>=]|\d)",
    )
)
_WORD_TRIGGERS = (re.compile(r"sm(?:_?\d|\b)"), re.compile(r"cc\b"))  # need a word start


def collect_gates(system: System, params: Any) -> Dict[str, Any]:
    """Probe section: ``{"dists": [...], "paths": [...], "python": str|None}``."""
    targets, problems, error = distribution_targets(
        system, params.get("paths") or (), params.get("dists") or (), params.get("python")
    )
    if error:
        return asdict(GatesFacts((), tuple(problems), error))
    results = []
    for label, paths in targets:
        target, target_problems = gates(label, paths)
        results.append(target)
        problems.extend(target_problems)
    return asdict(GatesFacts(tuple(results), tuple(problems)))


def gates(label: str, paths: Sequence[str]) -> Tuple[GatesTarget, List[Problem]]:
    collecting = gc.isenabled()
    gc.disable()  # many short-lived AST nodes, no cycles
    try:
        return _gates(label, paths)
    finally:
        if collecting:
            gc.enable()


def _gates(label: str, paths: Sequence[str]) -> Tuple[GatesTarget, List[Problem]]:
    files, problems = python_files(paths)
    init_cache: Dict[str, bool] = {}
    functions: List[GateFunction] = []
    candidates = 0
    for path in sorted(files):
        src, reason = SourceFile.load(path)
        if src is None:
            problems.append(Problem(path, reason))
            continue
        triggers = _trigger_lines(src.text)
        if not triggers:
            continue
        candidates += 1
        pieces, error = src.statement_pieces(triggers)
        if error:
            problems.append(Problem(path, error))
        module, _ = module_name(path, init_cache)
        finder = _GateFinder(src, triggers)
        try:
            for stmts, scope, def_line in pieces:
                finder.body(stmts, scope, (), def_line or 1)
        except RecursionError:
            problems.append(Problem(path, "too deeply nested to analyse"))
            continue
        for (function, line), found in finder.found.items():
            unique = {(g.line, g.kind, g.detail): g for g in found}
            ordered = tuple(sorted(unique.values(), key=lambda g: (g.line, g.kind)))
            functions.append(GateFunction(path, module, function, line, ordered))
    functions.sort(key=lambda f: (f.path, f.line))
    return GatesTarget(label, len(files), candidates, tuple(functions)), problems


def render_guards(guards: Sequence[Guard]) -> str:
    parts = []
    for guard in guards:
        if guard.kind in ("if", "while"):
            parts.append("%s %s" % (guard.kind, guard.condition))
        elif guard.kind == "else":
            parts.append("not (%s)" % guard.condition)
        elif guard.kind == "for":
            parts.append("for " + guard.condition)
        elif guard.kind == "except":
            parts.append("except " + (guard.condition or "(any)"))
    return " / ".join(parts)


class _GateFinder:
    def __init__(self, src: SourceFile, triggers: List[int]) -> None:
        self.src = src
        self.triggers = triggers
        self.found: Dict[Tuple[str, int], List[Gate]] = {}

    def add(self, scope: Tuple[Any, ...], kind: str, line: int, detail: str, message: str) -> None:
        names, guards, def_line = scope
        key = (".".join(names) or "<module>", def_line)
        gate = Gate(kind, line, self.src.line(line), detail, render_guards(guards), message)
        self.found.setdefault(key, []).append(gate)

    def body(
        self,
        stmts: Sequence[ast.stmt],
        names: Tuple[str, ...],
        guards: Tuple[Guard, ...],
        def_line: int,
    ) -> None:
        for stmt in stmts:
            position = bisect.bisect_left(self.triggers, stmt.lineno)
            if position == len(self.triggers) or self.triggers[position] > (
                stmt.end_lineno or stmt.lineno
            ):
                continue  # no trigger word anywhere in this statement
            self.stmt(stmt, (names, guards, def_line))

    def stmt(self, node: ast.stmt, scope: Tuple[Any, ...]) -> None:
        names, guards, def_line = scope
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.body(node.body, (*names, node.name), (), node.lineno)
            return
        if isinstance(node, (ast.If, ast.While)):
            self.expr(node.test, scope)
            test = self.src.segment(node.test)
            kind = "if" if isinstance(node, ast.If) else "while"
            self.body(node.body, names, (*guards, Guard(kind, test, node.lineno)), def_line)
            self.body(node.orelse, names, (*guards, Guard("else", test, node.lineno)), def_line)
            return
        if isinstance(node, (ast.For, ast.AsyncFor)):
            self.expr(node.iter, scope)
            text = "%s in %s" % (self.src.segment(node.target), self.src.segment(node.iter))
            self.body(node.body, names, (*guards, Guard("for", text, node.lineno)), def_line)
            self.body(node.orelse, names, guards, def_line)
            return
        if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            self._try(node, scope)  # type: ignore[arg-type]
            return
        self._raise_or_assert(node, scope)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                self.stmt(child, scope)
            else:
                self.expr(child, scope)

    def _try(self, node: ast.Try, scope: Tuple[Any, ...]) -> None:
        """A try (or try*): its body, each handler under an ``except`` guard, the rest."""
        names, guards, def_line = scope
        self.body(node.body, names, guards, def_line)
        for handler in node.handlers:
            text = self.src.segment(handler.type) if handler.type is not None else ""
            guard = Guard("except", text, handler.lineno)
            self.body(handler.body, names, (*guards, guard), def_line)
        self.body(node.orelse + node.finalbody, names, guards, def_line)

    def _raise_or_assert(self, node: ast.stmt, scope: Tuple[Any, ...]) -> None:
        """A raise or an assert whose message speaks of architectures: a gate."""
        if isinstance(node, ast.Raise) and node.exc is not None:
            exception, message = raise_parts(node, self.src)
            if ARCH_MESSAGE.search(message):
                self.add(scope, "raise", node.lineno, exception, message)
        if isinstance(node, ast.Assert) and node.msg is not None:
            message = self._message(node.msg)
            if ARCH_MESSAGE.search(message):
                self.add(scope, "assert", node.lineno, self.src.segment(node.test), message)

    def _message(self, node: ast.AST) -> str:
        text = string_value(node)
        return text if text is not None else self.src.segment(node)

    def expr(self, node: ast.AST, scope: Tuple[Any, ...]) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                self.call(sub, scope)
            elif isinstance(sub, ast.Compare) and self._arch_comparison(sub):
                self.add(scope, "comparison", sub.lineno, self.src.segment(sub), "")
            if isinstance(sub, (ast.Subscript, ast.Call, ast.Compare)):
                for variable, _, read in env_reads(sub, walk=False):
                    if "ARCH" in variable.upper():
                        line = getattr(read, "lineno", sub.lineno)
                        self.add(scope, "arch-env", line, variable, "")

    def call(self, node: ast.Call, scope: Tuple[Any, ...]) -> None:
        name = dotted(node.func) or ""
        last = name.rsplit(".", 1)[-1]
        kind = CAPABILITY_CALLS.get(last)
        if kind is None and "capability" in last.lower():
            kind = "nvml-call" if last.startswith("nvml") else "capability-call"
        if kind is not None:
            self.add(scope, kind, node.lineno, name, "")
        elif last in _WARN_CALLS and node.args:
            message = self._message(node.args[0])
            if ARCH_MESSAGE.search(message):
                self.add(scope, "warning", node.lineno, name, message)

    @staticmethod
    def _arch_comparison(node: ast.Compare) -> bool:
        operands = [node.left, *node.comparators]
        mentions_arch = numeric = False
        for operand in operands:
            text = dotted(operand) or ""
            if "version_info" in text or "python" in text.lower():
                return False
            if isinstance(operand, ast.Call) and dotted(operand.func) == "len":
                return False  # a count of archs, not an arch number
            mentions = _mentions_arch(operand)
            if mentions is None:
                return False  # divisibility (a % b == 0): a shape check
            mentions_arch = mentions_arch or mentions
            if _is_number(operand):
                numeric = True
        return mentions_arch and numeric


def _mentions_arch(operand: ast.AST) -> Optional[bool]:
    """Whether a name in ``operand`` speaks of an architecture (not of a shape); None when it
    holds a modulo (a divisibility test is a shape check)."""
    mentions = False
    for sub in ast.walk(operand):
        if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Mod):
            return None
        word = sub.id if isinstance(sub, ast.Name) else getattr(sub, "attr", None)
        words = set(word.lower().split("_")) if isinstance(word, str) else set()
        if words & _ARCH_WORDS and not words & _SHAPE_WORDS:
            mentions = True
    return mentions


def _trigger_lines(text: str) -> List[int]:
    """1-based numbers of the lines that hold a trigger word."""
    lower = text.lower()
    starts = [m.start() for pattern in _TRIGGERS for m in pattern.finditer(lower)]
    for pattern in _WORD_TRIGGERS:
        for match in pattern.finditer(lower):
            before = lower[match.start() - 1] if match.start() else " "
            if not (before.isalnum() or before == "_"):
                starts.append(match.start())
    return line_numbers(lower, sorted(starts))


def _is_number(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.Tuple):
        return bool(node.elts) and all(_is_number(e) for e in node.elts)
    if isinstance(node, ast.UnaryOp):
        return _is_number(node.operand)
    return False
