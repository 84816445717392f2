"""Tool inputs derived from the api functions: their keyword parameters as JSON Schema, and a
tool call's arguments bound back to those parameters.

A parameter of a plain type (str, int, float, bool, a sequence of them, optional or not) is a
property of the same name. A frozen dataclass parameter (``explain``'s ``Where``, ``fleet``'s
``FleetSource``) is flattened: its fields are properties, and the call builds it from them; one
that may be None is None when none of its fields is given (the server's own interpreter is never
the environment an assistant means: ``explain`` then reads the log alone). A
``Target`` is the four ways of naming one (``host``, ``container``, ``pod``, ``via``, at most
one), with the ``python`` property as the interpreter there. Anything else (a callback, an
options object) is not offered; it keeps its default, or the server supplies it (progress).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from archgap.transport.target import TARGET_KINDS, Target

# A recorded system tree instead of / is for tests and offline analysis, not for an assistant.
NOT_OFFERED = frozenset({"root"})
_PLAIN = {str: "string", int: "integer", float: "number", bool: "boolean"}
_SEQUENCES = (collections.abc.Sequence, list, tuple, collections.abc.Iterable)


class ArgumentError(ValueError):
    """Arguments a tool cannot be called with: said in one line."""


@dataclass(frozen=True)
class Bound:
    """How one api parameter is made from the call's arguments: taken as is (the property of
    the same name), built as a dataclass from its ``fields``, or a Target."""

    name: str
    kind: str  # "plain", "dataclass" or "target"
    cls: Any = None
    fields: tuple[Bound, ...] = ()
    optional: bool = False  # a dataclass that may be None: None when none of its fields is given
    required: bool = False  # a dataclass without a default: built even from no fields


@dataclass(frozen=True)
class Derived:
    """A function's tool input: the JSON Schema, and how to bind arguments to its parameters."""

    schema: dict[str, Any]
    bound: tuple[Bound, ...]
    supplied: tuple[str, ...] = ()  # parameters the server fills (a progress callback)
    properties: frozenset[str] = field(default_factory=frozenset)


def derive(
    function: Callable[..., Any],
    omit: frozenset[str] = frozenset(),
    supplied: frozenset[str] = frozenset(),
    described: Mapping[str, str] | None = None,
) -> Derived:
    """The input of ``function``: one property per offered keyword parameter; ``omit`` names
    parameters (or dataclass fields) not offered; ``supplied`` those the server fills;
    ``described`` a description per property name."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    bound: list[Bound] = []
    found_supplied: list[str] = []
    for parameter in _parameters(function):
        if parameter.name in supplied:
            found_supplied.append(parameter.name)
            continue
        if parameter.name in omit | NOT_OFFERED:
            continue
        hint = _hint(function, parameter.annotation)
        one = _bind(parameter.name, hint, parameter.default, omit, properties)
        if one is not None and parameter.default is inspect.Parameter.empty:
            one = replace(one, required=True)
        if one is None:
            if parameter.default is inspect.Parameter.empty:
                raise TypeError(f"{function.__name__}({parameter.name}) has no JSON form")
            continue
        bound.append(one)
        if parameter.default is inspect.Parameter.empty and one.kind == "plain":
            required.append(parameter.name)  # a dataclass without a default is built from fields
    for name, text in (described or {}).items():
        if name in properties:
            properties[name] = {"description": text, **properties[name]}
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    return Derived(schema, tuple(bound), tuple(found_supplied), frozenset(properties))


def _parameters(function: Callable[..., Any]) -> list[inspect.Parameter]:
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p for p in inspect.signature(function).parameters.values() if p.kind in kinds]


class _Names(dict[str, Any]):
    """A namespace that also finds names a module imports on first use (PEP 562)."""

    def __init__(self, module: Any) -> None:
        super().__init__()
        self._module = module

    def __missing__(self, name: str) -> Any:
        try:
            return getattr(self._module, name)
        except AttributeError:
            raise KeyError(name) from None


def _hint(function: Callable[..., Any], annotation: Any) -> Any:
    """The annotation as a type; None when it names something only a type checker imports."""
    if not isinstance(annotation, str):
        return None if annotation is inspect.Parameter.empty else annotation
    module = inspect.getmodule(function)
    try:
        return eval(annotation, vars(module), _Names(module))  # a type annotation, not input
    except (NameError, TypeError, AttributeError):
        return None


def _without_none(hint: Any) -> Any:
    """The type of an optional parameter; of one that also takes a richer form (explain's
    ``str | LogInput``), the plain type, which is what a tool call can send."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        rest = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(rest) > 1:
            rest = [a for a in rest if a in _PLAIN]
        return rest[0] if len(rest) == 1 else None
    return hint


def _value_schema(hint: Any) -> dict[str, Any] | None:
    """A plain value's schema: str, int, float, bool, or a homogeneous sequence of them."""
    hint = _without_none(hint)
    if hint in _PLAIN:
        return {"type": _PLAIN[hint]}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in _SEQUENCES and args and (len(args) == 1 or args[1:] == (Ellipsis,)):
        items = _value_schema(args[0])
        return {"type": "array", "items": items} if items is not None else None
    return None


def _default(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _bind(
    name: str, hint: Any, default: Any, omit: frozenset[str], properties: dict[str, Any]
) -> Bound | None:
    """How the parameter ``name`` is bound, its properties added to ``properties``; None when
    it has no JSON form."""
    value = _value_schema(hint)
    if value is not None:
        if default not in (inspect.Parameter.empty, None):
            value["default"] = _default(default)
        properties[name] = value
        return Bound(name, "plain")
    inner = _without_none(hint)
    if inner is Target:
        for kind in TARGET_KINDS:
            properties[kind] = {"type": "string"}
        properties.setdefault("python", {"type": "string"})
        return Bound(name, "target")
    if isinstance(inner, type) and dataclasses.is_dataclass(inner):
        hints = typing.get_type_hints(inner)
        fields = [
            _bind(f.name, hints.get(f.name), f.default, omit, properties)
            for f in dataclasses.fields(inner)
            if f.name not in omit | NOT_OFFERED
        ]
        bound = tuple(f for f in fields if f is not None)
        return Bound(name, "dataclass", inner, bound, optional=inner is not hint)
    return None


def bind(derived: Derived, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of the api call for a tool call's ``arguments`` (already checked
    against ``derived.schema``); a target named twice is an ``ArgumentError``."""
    unknown = sorted(set(arguments) - derived.properties)
    if unknown:
        raise ArgumentError(f"unknown argument {', '.join(unknown)}")
    keywords: dict[str, Any] = {}
    for one in derived.bound:
        if _given(one, arguments) or (one.required and one.kind == "dataclass"):
            keywords[one.name] = _value(one, arguments)
        elif one.optional:
            keywords[one.name] = None
    return keywords


def _given(one: Bound, arguments: Mapping[str, Any]) -> bool:
    if one.kind == "plain":
        return one.name in arguments
    if one.kind == "target":
        return any(arguments.get(kind) for kind in TARGET_KINDS)
    return any(_given(f, arguments) for f in one.fields)


def _value(one: Bound, arguments: Mapping[str, Any]) -> Any:
    if one.kind == "plain":
        value = arguments[one.name]
        return tuple(value) if isinstance(value, list) else value
    if one.kind == "target":
        return target(arguments)
    return one.cls(**{f.name: _value(f, arguments) for f in one.fields if _given(f, arguments)})


def target(arguments: Mapping[str, Any]) -> Target:
    """The Target that ``host``, ``container``, ``pod`` or ``via`` names, with ``python`` as
    the interpreter there; a bad name, or two, is an ``ArgumentError``."""
    from archgap.transport.target import TargetError, named_target

    try:
        return named_target(
            {kind: arguments.get(kind) for kind in TARGET_KINDS}, arguments.get("python")
        )
    except TargetError as exc:
        raise ArgumentError(str(exc)) from None


def narrowed(derived: Derived, name: str, allowed: Sequence[str], text: str = "") -> Derived:
    """``derived`` whose string property ``name`` takes only ``allowed`` (described by
    ``text``); without any, the property is gone, so a call that sends it is refused."""
    if name not in derived.properties:
        return derived
    properties = dict(derived.schema["properties"])
    if allowed:
        properties[name] = {"type": "string", "enum": list(allowed)}
        if text:
            properties[name] = {"description": text, **properties[name]}
        return replace(derived, schema={**derived.schema, "properties": properties})
    del properties[name]
    schema = {**derived.schema, "properties": properties}
    return replace(derived, schema=schema, properties=derived.properties - {name})
