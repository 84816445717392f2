"""Whether a branch condition of Python source holds on a GPU: the conditions ``gates`` and
``trace`` read from the installed code (``major < 8``, ``not (sm == 120)``,
``torch.cuda.get_device_capability() < (8, 0)``), evaluated for one compute capability.

Only what the compute capability decides is evaluated: the name a package gives it (``major``,
``sm``, ``cc``, ...) is a hint, read the way the package's own comparisons use it (an ``sm``
compared with ``90`` is ``10 * major + minor``). Anything else (a backend, a CUDA version, a dtype)
makes the answer ``None``: archgap cannot tell, and says so rather than guess."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from archgap.analysis.verdicts.compat import ComputeCapability

# Names a condition uses for the compute capability, as packages spell them (hints, not facts:
# each is only used where it is compared with a number, a tuple or a list of them).
_MAJOR = {"major", "sm_major", "cc_major", "capability_major", "arch_major", "device_major"}
_MINOR = {"minor", "sm_minor", "cc_minor", "capability_minor", "arch_minor", "device_minor"}
_SM = {
    "sm", "sm_version", "effective_sm", "arch", "sm_arch", "cuda_arch", "gpu_arch", "sm_count_arch",
    "compute_capability_int", "device_sm", "smver", "sm_ver", "device_arch", "sm_str", "arch_str",
}  # fmt: skip
_PAIR = {"cc", "capability", "compute_capability", "device_capability", "cap", "dev_cap"}
_CAPABILITY_CALLS = {"get_device_capability", "get_compute_capability"}

_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}  # fmt: skip


class _Sm(int):
    """``10 * major + minor``, compared as the package spells it: a number (``sm < 90``) or
    text (``device_arch != "90"``, FlashInfer's ``f"{major * 10 + minor}"``)."""


def _like(value: Any, other: Any) -> Any:
    """``value`` as text where it is an SM number compared with text (or a list of text)."""
    texts = other if isinstance(other, tuple) else (other,)
    if isinstance(value, _Sm) and texts and all(isinstance(x, str) for x in texts):
        return str(int(value))
    return value


class _Unknown(Exception):
    """The condition reads something the compute capability does not decide."""


def _name(node: ast.expr) -> str:
    """``major`` for ``major``, ``self.major`` and ``ctx.major``; "" otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _value(node: ast.expr, cc: ComputeCapability) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str):
        return node.value
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return tuple(_value(e, cc) for e in node.elts)
    if isinstance(node, ast.Call) and _name(node.func) in _CAPABILITY_CALLS:
        return (cc.major, cc.minor)
    if isinstance(node, ast.Subscript):  # cc[0], get_device_capability()[0]
        base = _value(node.value, cc)
        index = _value(node.slice, cc)
        if isinstance(base, tuple) and isinstance(index, int) and -len(base) <= index < len(base):
            return base[index]
        raise _Unknown
    name = _name(node)
    if name in _MAJOR:
        return cc.major
    if name in _MINOR:
        return cc.minor
    if name in _SM:
        return _Sm(cc.major * 10 + cc.minor)
    if name in _PAIR:
        return (cc.major, cc.minor)
    raise _Unknown


def _truth(node: ast.expr, cc: ComputeCapability) -> bool:
    if isinstance(node, ast.BoolOp):
        return _bool_op(node, cc)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _truth(node.operand, cc)
    if isinstance(node, ast.Compare):
        return _compare(node, cc)
    raise _Unknown


def _bool_op(node: ast.BoolOp, cc: ComputeCapability) -> bool:
    """``and``/``or``: one decided operand can settle it on its own (False for and, True for
    or); otherwise an undecided operand leaves it undecided."""
    results: list[bool | None] = []
    for value in node.values:
        try:
            results.append(_truth(value, cc))
        except _Unknown:
            results.append(None)
    settles = not isinstance(node.op, ast.And)  # the value that decides: False for and
    if settles in results:
        return settles
    if None in results:
        raise _Unknown
    return not settles


def _compare(node: ast.Compare, cc: ComputeCapability) -> bool:
    """A comparison chain, each link with Python's meaning; an operator or operands it does
    not decide leave it undecided."""
    left = _value(node.left, cc)
    for op, right_node in zip(node.ops, node.comparators, strict=True):
        right = _value(right_node, cc)
        check = _COMPARE.get(type(op))
        if check is None:
            raise _Unknown
        try:
            if not check(_like(left, right), _like(right, left)):
                return False
        except TypeError as error:  # a tuple compared with an int: not what it means
            raise _Unknown from error
        left = right
    return True


def holds(condition: str, cc: ComputeCapability) -> bool | None:
    """Whether ``condition`` (a Python expression) is true on compute capability ``cc``; None
    when it reads anything the compute capability does not decide, or is not an expression."""
    try:
        tree = ast.parse(condition.strip(), mode="eval")
    except SyntaxError:
        return None
    try:
        return _truth(tree.body, cc)
    except _Unknown:
        return None


def reach(guards: list[tuple[str, str]], cc: ComputeCapability) -> tuple[bool | None, list[str]]:
    """Whether a statement under the branch ``guards`` ((kind, test) pairs, outermost first:
    "if"/"while" hold when the test is true, "else"/"not" when it is false) is reached on ``cc``:
    False as soon as one guard is decided against it, True when every guard is decided for it,
    else None with the guards that cannot be told (a loop, a handler, a test on anything else).
    A path no guard of which the compute capability decides is None with every guard listed."""
    undecided: list[str] = []
    decided = False
    for kind, test in guards:
        value = holds(test, cc) if kind in ("if", "else", "while", "not") else None
        if value is None:
            undecided.append(_undecided(kind, test))
            continue
        if value != (kind in ("if", "while")):
            return False, []
        decided = True
    if not decided:
        return None, undecided
    return (True, []) if not undecided else (None, undecided)


def _undecided(kind: str, test: str) -> str:
    """A guard the compute capability does not decide, as a condition to read."""
    if kind in ("if", "while"):
        return test
    if kind in ("not", "else"):
        return f"not ({test})" if " " in test.strip() else f"not {test}"
    if kind == "for":
        loop = test if test.startswith("for ") else f"for {test}"
        return f"the loop `{loop}` reaches it"
    return f"{kind} {test}".strip() if not test.startswith(kind) else test


def gpu_decided(guards: list[tuple[str, str]], cc: ComputeCapability) -> bool:
    """Whether the compute capability decides at least one of ``guards``."""
    return any(holds(test, cc) is not None for kind, test in guards if kind != "for")


def split_condition(condition: str) -> list[tuple[str, str]]:
    """``gates``' condition text ("not (major == 9) / if major == 12 / except Exception") as
    (kind, test) pairs: ``if X``, ``not (X)``, and the rest kept as their own kind (for, except)."""
    out: list[tuple[str, str]] = []
    for part in (p.strip() for p in condition.split(" / ")) if condition else ():
        if part.startswith("not (") and part.endswith(")"):
            out.append(("not", part[5:-1]))
        elif part.startswith(("if ", "elif ", "while ")):
            kind, _, test = part.partition(" ")
            out.append(("while" if kind == "while" else "if", test))
        else:
            out.append((part.split(" ", 1)[0], part))
    return out
