"""The directories a package's own Python code adds to the Windows DLL search path, read from
its source as text (never imported).

Since Python 3.8 the DLLs an extension module (or a DLL loaded by full path through ctypes)
imports are looked for only in the system paths, the directory of the module being loaded and
the directories added with ``os.add_dll_directory`` (Python's "What's New In Python 3.8",
"DLL dependencies for extension modules ... are now resolved more securely"; ``os`` docs,
``add_dll_directory``). So a package that ships DLLs elsewhere registers those folders in its own
code: torch's ``_load_dll_libraries`` adds ``torch/lib`` (``os.path.join(os.path.dirname(__file__),
"lib")``), delvewheel patches ``__init__.py`` with ``_delvewheel_patch_*`` that adds
``<project>.libs`` beside the package, ctranslate2 adds its package folder
(``str(files(module_name))``).

Each ``os.add_dll_directory(X)`` call (and ``AddDllDirectory`` through ctypes) is found with
``ast``, and ``X`` is evaluated as far as it depends on the module's own place only: string
constants, ``__file__``, ``__name__``, ``os.pardir``, ``os.path.join/dirname/abspath/realpath/
normpath``, ``pathlib.Path`` (``/``, ``.parent``, ``.joinpath``), ``importlib.resources.files``
of the package, ``glob.glob`` (kept as a pattern), lists, tuples, ``+``, comprehensions and the
names assigned in the same scope (``=``, ``+=``, ``:=``, ``for``, ``.append``/``.extend``). A
value that depends on anything else (``sys.exec_prefix``, an environment variable) is not
read: its call's place is reported instead, so that the analysis says "unknown", never "found".
"""

from __future__ import annotations

import ast
import posixpath
from typing import Dict, List, Optional, Sequence, Tuple

MODULE = "\0module"  # the value of __name__: the package's own name
MAX_VALUES = 64  # directories one expression may stand for
MAX_DEPTH = 24  # names followed through one another at most
MAX_STEPS = 4096  # expressions evaluated per call at most (a = a + a ... doubles at each name)
REGISTER = ("add_dll_directory", "AddDllDirectory")
# calls whose value is their (first) argument's, or a path operation on it
PATH_CALLS = ("abspath", "realpath", "normpath", "str", "fspath", "Path", "PurePath",
              "PureWindowsPath", "WindowsPath", "resolve", "absolute")  # fmt: skip

SAME_VALUE = (*PATH_CALLS, "glob", "sorted", "list", "tuple", "filter")
Values = Tuple[List[str], bool]  # (the values found, whether some part was not read)


def registered_directories(source: str, init_file: str) -> Tuple[List[str], List[int]]:
    """(the directories, normalized, "*" kept for a glob pattern; the lines of the calls whose
    directory was not (fully) read) that ``source``, the module at ``init_file`` (a path with
    "/" separators), adds to the DLL search path. A module that does not parse adds nothing
    that is read: ([], [0])."""
    if "add_dll_directory" not in source and "AddDllDirectory" not in source:
        return [], []
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return [], [0]
    found: List[str] = []
    unread: List[int] = []
    for scope in _scopes(tree):
        names = _assignments(scope)
        for call in _calls(scope):
            if not call.args:
                continue
            values, partial = _Evaluator(init_file, names).value(call.args[0], 0)
            for value in values:
                path = posixpath.normpath(value.replace("\\", "/")) if value else ""
                if path and value != MODULE and path not in found:
                    found.append(path)
            if partial or not values:
                unread.append(call.lineno)
    return found, unread


def _scopes(tree: ast.AST) -> List[ast.AST]:
    """The module and each function in it (a name is looked up in the scope of its call)."""
    scopes: List[ast.AST] = [tree]
    scopes += [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return scopes


def _own_nodes(scope: ast.AST) -> List[ast.AST]:
    """The nodes of ``scope`` outside the functions and classes nested in it."""
    found: List[ast.AST] = []
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _calls(scope: ast.AST) -> List[ast.Call]:
    calls = []
    for node in _own_nodes(scope):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in REGISTER:
                calls.append(node)
    return sorted(calls, key=lambda c: c.lineno)


def _assignments(scope: ast.AST) -> Dict[str, List[ast.expr]]:
    """name -> every expression assigned to it in the scope (``for`` targets by their iterable,
    marked with a ``Starred`` wrapper: each of its items is a value of the name)."""
    names: Dict[str, List[ast.expr]] = {}

    def add(target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            names.setdefault(target.id, []).append(value)

    for node in _own_nodes(scope):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                add(target, node.value)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
            if node.value is not None:
                add(node.target, node.value)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            add(node.target, ast.Starred(value=node.iter, ctx=ast.Load()))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if node.func.attr in ("append", "extend") and node.args:
                arg = node.args[0]
                add(owner, arg if node.func.attr == "extend" else ast.List([arg], ast.Load()))
    return names


class _Evaluator:
    def __init__(self, init_file: str, names: Dict[str, List[ast.expr]]) -> None:
        self.init_file = init_file
        self.package = posixpath.dirname(init_file)
        self.names = names
        self.steps = 0

    def value(self, node: ast.expr, depth: int) -> Values:
        """The values ``node`` may have (one for a path, several for a list)."""
        self.steps += 1
        if depth > MAX_DEPTH or self.steps > MAX_STEPS:
            return [], True
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value], False
        if isinstance(node, ast.Name):
            return self._name(node.id, depth)
        if isinstance(node, ast.Attribute):
            return self._attribute(node, depth)
        if isinstance(node, ast.Starred):  # a for loop's iterable: its items
            return self.value(node.value, depth + 1)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return self._all(node.elts, depth)
        if isinstance(node, ast.BinOp):
            return self._operation(node, depth)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return self._comprehension(node, depth)
        if isinstance(node, ast.Call):
            return self._call(node, depth)
        if isinstance(node, ast.Subscript) and _dotted(node.value) == "sys.modules":
            return [MODULE], False  # sys.modules[__name__]: the module itself
        return [], True

    def _operation(self, node: ast.BinOp, depth: int) -> Values:
        if isinstance(node.op, ast.Add):  # two lists
            return self._all([node.left, node.right], depth)
        if isinstance(node.op, ast.Div):  # pathlib's "/"
            return self._join([node.left, node.right], depth)
        return [], True

    def _all(self, nodes: Sequence[ast.expr], depth: int) -> Values:
        values: List[str] = []
        partial = False
        for node in nodes:
            found, unread = self.value(node, depth + 1)
            values += found
            partial = partial or unread
        return values[:MAX_VALUES], partial

    def _name(self, name: str, depth: int) -> Values:
        if name == "__file__":
            return [self.init_file], False
        if name == "__name__":
            return [MODULE], False
        assigned = self.names.get(name)
        if not assigned:
            return [], True
        return self._all(assigned, depth)

    def _attribute(self, node: ast.Attribute, depth: int) -> Values:
        if _dotted(node) == "os.pardir":
            return [".."], False
        if node.attr == "parent":
            values, partial = self.value(node.value, depth + 1)
            return [posixpath.dirname(v) for v in values], partial
        if node.attr == "__name__":
            values, partial = self.value(node.value, depth + 1)
            return (values, partial) if values == [MODULE] else ([], True)
        return [], True

    def _comprehension(self, node: ast.expr, depth: int) -> Values:
        generators = getattr(node, "generators", [])
        element = getattr(node, "elt", None)
        if len(generators) != 1 or not isinstance(element, ast.Name):
            return [], True
        target = generators[0].target
        if not isinstance(target, ast.Name) or target.id != element.id:
            return [], True
        return self.value(generators[0].iter, depth + 1)  # a filter only narrows

    def _call(self, node: ast.Call, depth: int) -> Values:
        name, args = _arguments(node)
        if name in ("join", "joinpath"):
            return self._join(args, depth)
        if len(args) != 1:
            return [], True
        values, partial = self.value(args[0], depth + 1)
        if name == "dirname":
            return [posixpath.dirname(v) for v in values if v != MODULE], partial
        if name == "files":  # importlib.resources.files(the package)
            return ([self.package], partial) if values == [MODULE] else ([], True)
        # glob keeps its pattern ("*"); sorted, list, str, Path, abspath ... their argument
        return (values, partial) if name in SAME_VALUE else ([], True)

    def _join(self, parts: Sequence[ast.expr], depth: int) -> Values:
        """``os.path.join`` of the parts: one value per combination (a list in a part is not a
        path: unread)."""
        values = [""]
        partial = False
        for part in parts:
            found, unread = self.value(part, depth + 1)
            partial = partial or unread
            if not found or MODULE in found:
                return [], True
            values = [posixpath.join(v, f) if v else f for v in values for f in found]
            values = values[:MAX_VALUES]
        return values, partial


def _arguments(node: ast.Call) -> Tuple[str, List[ast.expr]]:
    """(the called name, the arguments that make its value): a method's object first
    (``Path(x).joinpath("lib")``, ``Path(x).resolve()``), ``filter``'s iterable alone (the
    predicate only narrows)."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    args = list(node.args)
    if isinstance(func, ast.Attribute) and (name == "joinpath" or name in PATH_CALLS):
        args = [func.value, *args] if name == "joinpath" or not args else args
    if name == "filter" and len(args) == 2:
        args = args[1:]
    return name, args


def _dotted(node: ast.expr) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        owner = _dotted(node.value)
        return owner + "." + node.attr if owner else None
    return None


__all__ = ["registered_directories"]
