"""What feeds a function and what it can raise, within one distribution's source.

Resolves calls statically (local and module imports, relative imports, ``self.method``, classes to
their ``__init__``) to functions of the same top-level package, to a bounded depth, and reports
environment variables read on the way (knobs) and ``raise`` statements that escape (for swallowed
exceptions). Whole modules are parsed here, but only those the call graph actually reaches.
"""

from __future__ import annotations

import ast
import os
from typing import Dict, List, Optional, Sequence, Set, Tuple

from ..facts import CallSite, Frame, Knob, Raiser, Swallow
from .files import module_name, module_path
from .sourcefile import SourceFile

MAX_CALL_DEPTH = 6
# Python 3.8 wraps subscript keys in ast.Index; later versions deprecate (and drop) the class.
AST_INDEX: Tuple[type, ...] = tuple(getattr(ast, n) for n in ("Index",) if hasattr(ast, n))
MAX_FUNCTIONS = 300  # per question: bounds the time on a pathological call graph

# Handlers that catch anything.
BROAD_EXCEPTIONS = frozenset(("Exception", "BaseException"))
# Calls a swallowing handler may make while still "only logging or warning".
_QUIET_CALL_WORDS = ("log", "warn", "print", "debug", "info", "error", "exception", "critical")
_BUILTIN_CALLS = frozenset(
    [
        "range",
        "len",
        "int",
        "str",
        "float",
        "bool",
        "list",
        "dict",
        "set",
        "tuple",
        "sorted",
        "reversed",
        "enumerate",
        "zip",
        "map",
        "filter",
        "isinstance",
        "issubclass",
        "getattr",
        "hasattr",
        "setattr",
        "print",
        "min",
        "max",
        "sum",
        "any",
        "all",
        "abs",
        "repr",
        "type",
        "iter",
        "next",
        "open",
        "format",
        "super",
        "object",
        "frozenset",
        "id",
        "hash",
        "round",
        "divmod",
        "callable",
        "vars",
    ]
)
# Methods that change a list, set or dict in place: a call ``x.append(...)`` is a write of ``x``
# (trace), not a call into other code (the knob and raise analysis).
MUTATORS = frozenset(
    (
        "add",
        "append",
        "extend",
        "update",
        "insert",
        "setdefault",
        "pop",
        "popitem",
        "clear",
        "remove",
        "discard",
    )
)
_ENV_MAPPINGS = ("os.environ", "environ")
_ENV_GETTERS = {
    "os.environ.get": "os.environ.get",
    "environ.get": "os.environ.get",
    "os.getenv": "os.getenv",
    "getenv": "os.getenv",
    "os.environ.setdefault": "os.environ.setdefault",
    "os.environ.pop": "os.environ.pop",
}


def dotted(node: ast.AST) -> Optional[str]:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts: List[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def string_value(node: Optional[ast.AST]) -> Optional[str]:
    if isinstance(node, AST_INDEX):  # Python 3.8 wraps subscripts
        node = getattr(node, "value", None)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def env_reads(node: ast.AST, walk: bool = True) -> List[Tuple[str, str, ast.AST]]:
    """(variable, access, node) for every literal environment read under ``node`` (or in
    ``node`` itself when ``walk`` is false)."""
    found: List[Tuple[str, str, ast.AST]] = []
    for sub in ast.walk(node) if walk else (node,):
        read = _env_read(sub)
        if read is not None:
            found.append((read[0], read[1], sub))
    return found


def _env_read(sub: ast.AST) -> Optional[Tuple[str, str]]:
    """(variable, access) when ``sub`` itself reads a literal variable: os.environ[...], a
    getter (os.getenv, os.environ.get), or ``"X" in os.environ``."""
    if isinstance(sub, ast.Subscript) and dotted(sub.value) in _ENV_MAPPINGS:
        key = string_value(sub.slice)
        return None if key is None else (key, "os.environ[...]")
    if isinstance(sub, ast.Call) and sub.args:
        access = _ENV_GETTERS.get(dotted(sub.func) or "")
        key = string_value(sub.args[0])
        return (key, access) if access and key is not None else None
    if (
        isinstance(sub, ast.Compare)
        and len(sub.ops) == 1
        and isinstance(sub.ops[0], (ast.In, ast.NotIn))
        and dotted(sub.comparators[0]) in _ENV_MAPPINGS
    ):
        key = string_value(sub.left)
        return None if key is None else (key, "in os.environ")
    return None


def handler_names(node: ast.Try) -> Set[str]:
    """Exception names the handlers of a try catch; "*" for a broad one."""
    names: Set[str] = set()
    for handler in node.handlers:
        types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        for exc_type in types:
            name = (dotted(exc_type) or "").rsplit(".", 1)[-1] if exc_type is not None else "*"
            names.add("*" if name in BROAD_EXCEPTIONS or name == "*" else name)
    return names


def is_broad(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any((dotted(t) or "").rsplit(".", 1)[-1] in BROAD_EXCEPTIONS for t in types)


def only_quiet(body: List[ast.stmt]) -> bool:
    """A handler body that logs, warns, passes or returns, and never raises."""
    for stmt in body:
        if any(isinstance(sub, ast.Raise) for sub in ast.walk(stmt)):
            return False
        if isinstance(stmt, (ast.Pass, ast.Continue, ast.Break, ast.Return)):
            continue
        if isinstance(stmt, ast.Expr):
            if isinstance(stmt.value, ast.Constant):
                continue
            if isinstance(stmt.value, ast.Call):
                name = (dotted(stmt.value.func) or "").lower()
                if any(word in name for word in _QUIET_CALL_WORDS):
                    continue
            return False
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and isinstance(
            stmt.value, (ast.Constant, ast.Name, ast.List, ast.Dict, ast.Tuple, ast.Set)
        ):
            continue
        return False
    return True


def raise_parts(node: ast.Raise, src: SourceFile) -> Tuple[str, str]:
    """(exception name, message text) of a raise statement."""
    exc = node.exc
    if isinstance(exc, ast.Call):
        name = dotted(exc.func) or src.segment(exc.func)
        message = ""
        if exc.args:
            arg = exc.args[0]
            text = string_value(arg)
            message = text if text is not None else src.segment(arg)
        return name, message
    if exc is None:
        return "", ""
    return dotted(exc) or src.segment(exc), ""


class ModuleInfo:
    """A parsed module of the inspected tree: its imports and its functions by qualname."""

    def __init__(self, path: str, src: SourceFile, tree: ast.Module, module: str, root: str):
        self.path = path
        self.src = src
        self.module = module
        self.root = root
        self.package = module.split(".", 1)[0]
        self.is_package = os.path.basename(path) == "__init__.py"
        self.imports: Dict[str, Tuple[str, Optional[str]]] = {}
        self.defs: Dict[str, ast.AST] = {}
        self.env_globals: Dict[str, List[Tuple[str, str, ast.AST]]] = {}
        for stmt in _top_level(tree.body):
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self.imports.update(import_bindings(stmt, self))
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self._add_def(stmt, "")
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                reads = env_reads(stmt.value)
                if reads:
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                    for target in targets:
                        if isinstance(target, ast.Name):
                            self.env_globals[target.id] = reads

    def _add_def(self, node: ast.AST, prefix: str) -> None:
        name = prefix + node.name  # type: ignore[attr-defined]
        self.defs.setdefault(name, node)
        if isinstance(node, ast.ClassDef):
            for stmt in _top_level(node.body):
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    self._add_def(stmt, name + ".")

    def absolute(self, module: Optional[str], level: int) -> str:
        """The absolute name of a (possibly relative) imported module."""
        if not level:
            return module or ""
        parts = self.module.split(".")
        base = parts if self.is_package else parts[:-1]
        base = base[: len(base) - (level - 1)] if level > 1 else base
        return ".".join(base + ([module] if module else []))


def _top_level(body: List[ast.stmt]) -> List[ast.stmt]:
    """Statements of a body, looking into module-level if/try (conditional imports and defs)."""
    out: List[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            out.extend(_top_level(stmt.body + stmt.orelse))
        elif isinstance(stmt, ast.Try):
            out.extend(_top_level(stmt.body + stmt.orelse + stmt.finalbody))
            for handler in stmt.handlers:
                out.extend(_top_level(handler.body))
        else:
            out.append(stmt)
    return out


def import_bindings(stmt: ast.AST, info: ModuleInfo) -> Dict[str, Tuple[str, Optional[str]]]:
    """local name -> (module, attribute or None for the module itself)."""
    bound: Dict[str, Tuple[str, Optional[str]]] = {}
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:
            if alias.asname:
                bound[alias.asname] = (alias.name, None)
            else:
                top = alias.name.split(".", 1)[0]
                bound[top] = (top, None)
    elif isinstance(stmt, ast.ImportFrom):
        base = info.absolute(stmt.module, stmt.level)
        for alias in stmt.names:
            if alias.name != "*":
                bound[alias.asname or alias.name] = (base, alias.name)
    return bound


class Program:
    """The inspected source tree, parsed module by module as the call graph reaches it."""

    def __init__(self) -> None:
        self._infos: Dict[str, Optional[ModuleInfo]] = {}
        self._init_cache: Dict[str, bool] = {}

    def info(self, path: str, src: Optional[SourceFile] = None) -> Optional[ModuleInfo]:
        if path not in self._infos:
            info: Optional[ModuleInfo] = None
            if src is None:
                src, _ = SourceFile.load(path)
            if src is not None:
                tree, _ = src.module()
                if tree is not None:
                    module, root = module_name(path, self._init_cache)
                    info = ModuleInfo(path, src, tree, module, root)
            self._infos[path] = info
        return self._infos[path]

    def lookup(
        self, info: ModuleInfo, module: str, attr: Optional[str], hops: int = 0
    ) -> Optional[Tuple[ModuleInfo, str, ast.AST]]:
        """The function (or class __init__) ``module.attr``, within ``info``'s package."""
        if attr is None or module.split(".", 1)[0] != info.package or hops > 3:
            return None
        path = module_path(info.root, module)
        target = self.info(path) if path else None
        if target is None:
            return None
        if attr in target.defs:
            return _callable(target, attr)
        if attr in target.imports:  # a re-export: follow it
            mod, name = target.imports[attr]
            return self.lookup(target, mod, name, hops + 1)
        return None

    def resolve(
        self,
        info: ModuleInfo,
        qualname: str,
        call: ast.Call,
        local_imports: Dict[str, Tuple[str, Optional[str]]],
    ) -> Optional[Tuple[ModuleInfo, str, ast.AST]]:
        func = call.func
        if isinstance(func, ast.Name):
            if func.id in local_imports:
                return self.lookup(info, *local_imports[func.id])
            if func.id in info.defs:
                return _callable(info, func.id)
            if func.id in info.imports:
                return self.lookup(info, *info.imports[func.id])
            return None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            base, attr = func.value.id, func.attr
            if base in ("self", "cls") and "." in qualname:
                return _method(info, qualname, attr)
            if base in info.defs and base + "." + attr in info.defs:
                return _callable(info, base + "." + attr)
            binding = local_imports.get(base) or info.imports.get(base)
            if binding is not None:
                module, name = binding
                module = module if name is None else module + "." + name
                return self.lookup(info, module, attr)
        return None


def _method(
    info: ModuleInfo, qualname: str, attr: str
) -> Optional[Tuple[ModuleInfo, str, ast.AST]]:
    """``self.attr`` / ``cls.attr`` called in ``qualname``: the method of the innermost
    enclosing class of this module that defines it."""
    owner = qualname.rsplit(".", 1)[0]
    while owner:
        if owner + "." + attr in info.defs:
            return _callable(info, owner + "." + attr)
        owner = owner.rsplit(".", 1)[0] if "." in owner else ""
    return None


def _callable(info: ModuleInfo, qualname: str) -> Optional[Tuple[ModuleInfo, str, ast.AST]]:
    node = info.defs[qualname]
    if isinstance(node, ast.ClassDef):
        init = qualname + ".__init__"
        return (info, init, info.defs[init]) if init in info.defs else None
    return info, qualname, node


def local_imports(node: ast.AST, info: ModuleInfo) -> Dict[str, Tuple[str, Optional[str]]]:
    bound: Dict[str, Tuple[str, Optional[str]]] = {}
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Import, ast.ImportFrom)):
            bound.update(import_bindings(sub, info))
    return bound


def _calls(node: ast.AST) -> List[ast.Call]:
    return sorted(
        (sub for sub in ast.walk(node) if isinstance(sub, ast.Call)),
        key=lambda c: (c.lineno, c.col_offset),
    )


def knobs(program: Program, info: ModuleInfo, qualname: str, node: ast.AST) -> Tuple[Knob, ...]:
    """Environment variables read in ``node`` or in the functions it calls (bounded depth)."""
    found: Dict[Tuple[str, str, int], Knob] = {}
    queue: List[Tuple[ModuleInfo, str, ast.AST, Tuple[Frame, ...], int]] = [
        (info, qualname, node, (), 0)
    ]
    seen = {(info.path, qualname)}
    while queue and len(seen) <= MAX_FUNCTIONS:
        current, name, body, frames, depth = queue.pop(0)
        function = current.module + "." + name if name != "<module>" else current.module
        for variable, access, read in env_reads(body):
            line = read.lineno  # type: ignore[attr-defined]
            key = (variable, current.path, line)
            if key not in found:
                path = (*frames, Frame(function, current.path, line))
                found[key] = Knob(
                    variable, access, current.path, line, current.src.line(line), path
                )
        for sub in ast.walk(body):
            if isinstance(sub, ast.Name) and sub.id in current.env_globals:
                for variable, access, read in current.env_globals[sub.id]:
                    line = read.lineno  # type: ignore[attr-defined]
                    key = (variable, current.path, line)
                    if key not in found:
                        path = (
                            *frames,
                            Frame(function, current.path, sub.lineno),
                            Frame(current.module, current.path, line),
                        )
                        found[key] = Knob(
                            variable, access, current.path, line, current.src.line(line), path
                        )
        if depth >= MAX_CALL_DEPTH:
            continue
        imports = local_imports(body, current)
        for call in _calls(body):
            target = program.resolve(current, name, call, imports)
            if target is None or (target[0].path, target[1]) in seen:
                continue
            seen.add((target[0].path, target[1]))
            step = (*frames, Frame(function, current.path, call.lineno))
            queue.append((target[0], target[1], target[2], step, depth + 1))
    return tuple(found.values())


class _Walk:
    """What a try body can raise: each raise its handlers on the way do not catch, followed into
    the functions it calls (at most MAX_CALL_DEPTH deep, MAX_FUNCTIONS in all), and the calls of
    the body itself that resolve to no function of the program."""

    def __init__(self, program: Program, seen: Set[Tuple[str, str]]) -> None:
        self.program = program
        self.seen = seen
        self.raisers: List[Raiser] = []
        self.external: List[CallSite] = []

    def visit(
        self,
        current: ModuleInfo,
        name: str,
        nodes: Sequence[ast.AST],
        caught: Set[str],
        frames: Tuple[Frame, ...],
        depth: int,
        local: Dict[str, Tuple[str, Optional[str]]],
    ) -> None:
        fn = current.module + "." + name if name != "<module>" else current.module
        for sub in nodes:
            if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(sub, ast.Try):
                inner = caught | handler_names(sub)
                self.visit(current, name, list(sub.body), inner, frames, depth, local)
                rest = [h.body for h in sub.handlers] + [list(sub.orelse) + list(sub.finalbody)]
                for block in rest:
                    self.visit(current, name, list(block), caught, frames, depth, local)
                continue
            if isinstance(sub, ast.Raise) and sub.exc is not None:
                self._raise(current, fn, sub, caught, frames)
            if isinstance(sub, ast.Call):
                target = self.program.resolve(current, name, sub, local)
                here = (*frames, Frame(fn, current.path, sub.lineno))
                if target is not None:
                    self._follow(target, caught, here, depth)
                elif depth == 0:
                    self._external(sub)
            self.visit(current, name, list(ast.iter_child_nodes(sub)), caught, frames, depth, local)

    def _raise(
        self,
        current: ModuleInfo,
        fn: str,
        sub: ast.Raise,
        caught: Set[str],
        frames: Tuple[Frame, ...],
    ) -> None:
        """A raise no enclosing handler of the walk catches is a raiser."""
        exc, message = raise_parts(sub, current.src)
        if "*" in caught or exc.rsplit(".", 1)[-1] in caught:
            return
        here = (*frames, Frame(fn, current.path, sub.lineno))
        self.raisers.append(Raiser(exc, message, current.path, sub.lineno, fn, here))

    def _follow(
        self,
        target: Tuple[ModuleInfo, str, ast.AST],
        caught: Set[str],
        frames: Tuple[Frame, ...],
        depth: int,
    ) -> None:
        """Walk into a called function of the program, once, within the depth and count bounds."""
        key = (target[0].path, target[1])
        if depth >= MAX_CALL_DEPTH or key in self.seen or len(self.seen) >= MAX_FUNCTIONS:
            return
        self.seen.add(key)
        body = list(getattr(target[2], "body", []))
        local = local_imports(target[2], target[0])
        self.visit(target[0], target[1], body, caught, frames, depth + 1, local)

    def _external(self, sub: ast.Call) -> None:
        """A call of the try body that leaves the program (not a builtin, a mutator or an
        exception being built)."""
        text = dotted(sub.func) or ""
        method = text.rsplit(".", 1)[-1]
        if (
            text
            and text not in _BUILTIN_CALLS
            and method not in MUTATORS
            and not method.endswith(("Error", "Exception", "Warning"))
        ):
            self.external.append(CallSite(text, sub.lineno))


def swallow(
    program: Program, info: ModuleInfo, qualname: str, function_node: ast.AST, node: ast.Try
) -> Optional[Swallow]:
    """The swallowing broad handler of ``node`` and what its body can raise, or None."""
    handler = next((h for h in node.handlers if is_broad(h) and only_quiet(h.body)), None)
    if handler is None:
        return None
    src = info.src
    walk = _Walk(program, {(info.path, qualname)})
    walk.visit(info, qualname, list(node.body), set(), (), 0, local_imports(function_node, info))
    handler_text = src.line(handler.lineno)
    action = src.line(handler.body[0].lineno) if handler.body else ""
    unique_raisers = tuple({(r.path, r.line): r for r in walk.raisers}.values())
    unique_external = tuple({(c.call, c.line): c for c in walk.external}.values())
    return Swallow(
        src.path, node.lineno, handler.lineno, handler_text, action, unique_raisers, unique_external
    )
