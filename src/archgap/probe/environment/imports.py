"""What a distribution's import needs that is not installed: the modules its Python source
imports unconditionally when it is imported, which nothing in the environment provides.

``import spconv`` runs spconv/__init__.py, whose module-level ``from .core import ...`` runs
spconv/core.py, whose module-level ``from cumm.gemm.main import ...`` raises
``ModuleNotFoundError: No module named 'cumm'`` when no site-packages directory holds ``cumm``.
Read as text (never imported): the statements at module level of the distribution's own
top-level modules (RECORD's first path components), following its own modules that they import
the same way. An import inside a function, a class, ``if``, ``try`` (an optional dependency,
``except ImportError``) or ``with`` is not unconditional and is not followed. A module is
provided when a site-packages directory holds ``name/``, ``name.py`` or an extension
``name.*.so``/``.pyd``, or when it is the interpreter's (built in, or in its standard library).
Only read for a distribution with a ``Requires-Dist`` (outside an extra) on a distribution
that is not installed: anything else its import needs is installed, or not asked for.
"""

from __future__ import annotations

import csv
import io
import os
import re
import sys
import sysconfig
import tokenize
from dataclasses import replace
from typing import Dict, List, Optional, Sequence, Set, Tuple

from ..facts import Distribution
from .system import read_regular

MAX_RECORD_BYTES = 16 << 20
MAX_MODULES = 256  # own modules read at most per distribution
MAX_SOURCE_BYTES = 2 << 20  # bytes of one module read at most
MAX_FOUND = 64  # missing imports reported at most per distribution
MAX_TOTAL_BYTES = 4 << 20  # source read at most per distribution
MAX_DEPTH = 64  # own modules importing one another, followed this deep at most
REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
EXTENSION = (".py", ".pyc", ".so", ".pyd")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def with_unresolved_imports(
    dists: Sequence[Distribution], site_packages: Sequence[str]
) -> Tuple[Distribution, ...]:
    """``dists``, each distribution with native files and a Requires-Dist on one that is not
    installed given the imports its import needs that nothing provides."""
    installed = {canonical(d.name) for d in dists}
    found = []
    for d in dists:
        missing = missing_requirements(d.requires, installed) if d.native_files else []
        if missing:
            wanted = {canonical(m) for m in missing}
            d = replace(
                d, unresolved_imports=unresolved_imports(d.dist_info, site_packages, wanted)
            )
        found.append(d)
    return tuple(found)


def missing_requirements(requires: Sequence[str], installed: Set[str]) -> List[str]:
    """The names of the Requires-Dist lines, outside an extra, that name no installed
    distribution (``installed``: canonical names)."""
    missing = []
    for line in requires:
        requirement, _, marker = line.partition(";")
        match = REQUIREMENT_NAME.match(requirement)
        if match and "extra" not in marker and canonical(match.group(1)) not in installed:
            missing.append(match.group(1))
    return missing


def unresolved_imports(
    dist_info: str, site_packages: Sequence[str], wanted: Optional[Set[str]] = None
) -> Tuple[Tuple[str, str], ...]:
    """((module, "its file:line"), ...) of the modules the distribution's import needs that no
    site-packages directory and not the interpreter provides, each once, in the order the
    import system runs them (depth first: an own module runs when it is first imported), so
    the first is the ModuleNotFoundError the import raises. With ``wanted`` (the canonical
    names of the requirements that are not installed), only the modules one of them may
    provide (its name, or its name before a suffix: cumm for cumm-cu120), and the walk ends
    once each has one."""
    site = os.path.dirname(dist_info)
    own = _own_modules(dist_info)
    if not own:
        return ()
    provided = _Provided(site_packages)
    found: Dict[str, str] = {}
    seen: Set[str] = set()
    budget = [MAX_TOTAL_BYTES]
    left = set(wanted) if wanted is not None else None

    def external(top: str, path: str, line: int) -> None:
        # an import of another distribution's module: missing if no directory provides it
        if top in found or len(found) >= MAX_FOUND:
            return
        names = _may_provide(top, left) if left is not None else {top}
        if names and not provided.has(top) and _at_module_level(path, line):
            found[top] = "%s:%d" % (os.path.relpath(path, site), line)
            if left is not None:
                left.difference_update(names)

    def run(module: str, depth: int) -> None:
        path = _source(site, module)
        if path is None or len(seen) >= MAX_MODULES or depth > MAX_DEPTH or budget[0] <= 0:
            return
        if left is not None and not left:
            return
        for name, line in _unconditional_imports(path, module, budget):
            top = name.split(".")[0]
            if top not in own:
                external(top, path, line)
                continue
            for candidate in _own_candidates(name):
                if candidate not in seen:
                    seen.add(candidate)
                    run(candidate, depth + 1)

    for module in sorted(own):
        if module not in seen:
            seen.add(module)
            run(module, 0)
    return tuple(found.items())


def _may_provide(module: str, wanted: Set[str]) -> Set[str]:
    """The requirement names of ``wanted`` whose distribution may provide ``module`` by name."""
    name = canonical(module)
    return {w for w in wanted if w == name or w.startswith(name + "-")}


def _own_modules(dist_info: str) -> Set[str]:
    """The top-level modules the distribution installs, from its RECORD's first components."""
    try:
        data, _ = read_regular(os.path.join(dist_info, "RECORD"), MAX_RECORD_BYTES)
    except OSError:
        return set()
    own = set()
    for row in csv.reader(data.decode("utf-8", "replace").splitlines()):
        name = row[0] if row else ""
        first, slash, _ = name.partition("/")
        if not slash:
            stem = first.split(".")[0]
            if first.endswith(EXTENSION) and stem.isidentifier():
                own.add(stem)
        elif first.isidentifier():
            own.add(first)
    return own


def _own_candidates(name: str) -> List[str]:
    """The module ``name`` and, for ``from a.b import c``, its possible submodule ``a.b.c``
    (recorded as ``a.b.c`` by ``_unconditional_imports``): both as dotted names."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _source(site: str, module: str) -> Optional[str]:
    """The source file of an own module: a/b.py or a/b/__init__.py; None if neither."""
    base = os.path.join(site, *module.split("."))
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return path
    return None


# An import statement at module level starts a line (a statement in a block is indented). The
# walk reads these lines alone (ast.parse of every module cost 0.3 s on CuPy); a line inside a
# string can look like one, so an import reported as missing is confirmed by the tokenizer.
IMPORT_LINE = re.compile(
    rb"^(?:import[ \t]+([^\n#;]+)|from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t(]+([^\n#;)]*))", re.M
)


def _from_target(package: str, dots: str, name: str) -> Optional[str]:
    """The absolute module of ``from <dots><name> import``, in ``package``; None for
    ``__future__``, a relative import above the top package, or no name at all."""
    if name == "__future__":
        return None
    level = len(dots)
    if not level:
        return name or None
    parts = package.split(".") if package else []
    if level - 1 > len(parts):
        return None
    stem = parts[: len(parts) - (level - 1)]
    return ".".join(stem + ([name] if name else [])) or None


def _imported_names(names: str) -> List[str]:
    """The names ``from X import a, b as c`` imports (a, b), not ``*``."""
    return [n.split()[0] for n in names.split(",") if n.split() and n.split()[0] != "*"]


def _unconditional_imports(path: str, module: str, budget: List[int]) -> List[Tuple[str, int]]:
    """(absolute module name, line) of each import statement that starts a line of the file
    ``path`` (the module ``module``); for ``from X import a`` also X.a (a may be a submodule).
    Names continued on the next line (``from . import (\n a,``) are not read."""
    try:
        data, more = read_regular(path, MAX_SOURCE_BYTES, follow=False)
    except OSError:
        return []  # a link, an unreadable file: nothing read from it
    budget[0] -= len(data)
    if more:
        return []
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    found: List[Tuple[str, int]] = []
    line, counted = 1, 0
    for match in IMPORT_LINE.finditer(data):
        line += data.count(b"\n", counted, match.start())
        counted = match.start()
        plain, dots, name, names = (g.decode("utf-8", "replace") if g is not None else None
                                    for g in match.groups())  # fmt: skip
        if plain is not None:
            found += [(n.split()[0], line) for n in plain.split(",") if n.split()]
            continue
        target = _from_target(package, dots or "", name or "")
        if target:
            found.append((target, line))
            found += [("%s.%s" % (target, n), line) for n in _imported_names(names or "")]
    # a submodule X.a that does not exist is an attribute: only X itself must be provided
    return found


def _at_module_level(path: str, line: int) -> bool:
    """Whether an import statement at module level of ``path`` starts at ``line``: its first
    token, at column 0 (a statement of a block is indented), not inside a string. Tokenized
    only up to that line (imports are near the top; parsing all of warp's types.py took 0.26 s)."""
    try:
        data, _ = read_regular(path, MAX_SOURCE_BYTES, follow=False)
        for token in tokenize.tokenize(io.BytesIO(data).readline):
            if token.start[0] > line:
                return False
            if token.type == tokenize.STRING and token.start[0] < line <= token.end[0]:
                return False  # a line of a string that reads like an import
            if token.start == (line, 0):
                return token.type == tokenize.NAME and token.string in ("import", "from")
    except (OSError, SyntaxError, ValueError, tokenize.TokenError, RecursionError, MemoryError):
        return False  # a link, an unreadable or hostile file: nothing claimed from it
    return False


class _Provided:
    """Whether a top-level module is there: in a site-packages directory or the interpreter's."""

    def __init__(self, site_packages: Sequence[str]) -> None:
        self.listings: List[Set[str]] = []
        stdlib = sysconfig.get_paths().get("stdlib")
        dirs = list(site_packages)
        dirs += [stdlib, os.path.join(stdlib, "lib-dynload")] if stdlib else []
        for directory in dirs:
            try:
                self.listings.append(set(os.listdir(directory)))
            except OSError:
                continue
        self.builtin = set(sys.builtin_module_names) | set(getattr(sys, "stdlib_module_names", ()))

    def has(self, name: str) -> bool:
        if name in self.builtin:
            return True
        for names in self.listings:
            if name in names or name + ".py" in names:
                return True
            if any(n.startswith(name + ".") and n.endswith(EXTENSION) for n in names):
                return True
        return False
