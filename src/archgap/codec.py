"""The codec of the wire types (``archgap.probe.facts``): JSON in (``decode``) and out (``encode``).

The probe serialises its frozen dataclasses with ``dataclasses.asdict``; ``decode`` rebuilds them
from JSON using their type hints, so a fact collected on another host becomes the same value as
one collected here.

Decoding is strict (a wrong type, a missing field or a malformed array is a ``DecodeError`` that
names where in the document it is) and cheap: the type hints of each class are read once and
turned into a decoder function, cached per type, so a document of 50,000 kernel entries costs one
call per object rather than one ``typing.get_type_hints`` per object. The path in an error message
is put together only when decoding fails.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["DecodeError", "decode", "encode", "prepare"]

T = TypeVar("T")
Decoder = Callable[[Any], Any]
NoneType = type(None)
MAX_SHAPES = 64  # plain shapes remembered per class


class DecodeError(ValueError):
    """JSON that does not match the facts' shape."""


class _Mismatch(Exception):
    """A decoding failure on its way up; ``path`` grows by one step per level it leaves."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.path: list[str] = []


_PLAIN = frozenset((str, int, float, bool, NoneType))
_FIELD_NAMES: dict[type, tuple[str, ...] | None] = {}


def _field_names(cls: type) -> tuple[str, ...] | None:
    """The field names of a dataclass type, found once per type; None for any other type."""
    if cls not in _FIELD_NAMES:
        fields = dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else None
        _FIELD_NAMES[cls] = None if fields is None else tuple(f.name for f in fields)
    return _FIELD_NAMES[cls]


def encode(value: Any) -> Any:
    """A dataclass (or tuple of them) as plain JSON data."""
    names = None if isinstance(value, type) else _field_names(type(value))
    if names is not None:  # plain fields as they are: a torch host has 48,000 entries of 14
        fields = ((name, getattr(value, name)) for name in names)
        return {name: v if type(v) in _PLAIN else encode(v) for name, v in fields}
    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    return value


def decode(cls: type[T], data: Any) -> T:
    """Rebuild a frozen dataclass from JSON data, checking types on the way."""
    try:
        return typing.cast(T, _decoder(cls)(data))
    except _Mismatch as failure:
        where = cls.__name__ + "".join(reversed(failure.path))
        raise DecodeError(f"{where}: {failure.message}") from None


def prepare(*classes: type) -> None:
    """Build the decoders of ``classes`` now (``decode`` builds each on first use): for a caller
    with time to spare before its first document."""
    for cls in classes:
        _decoder(cls)


_DECODERS: dict[Any, Decoder] = {}


def _decoder(tp: Any) -> Decoder:
    """The decoder of one type, built once (types are hashable: classes and typing aliases)."""
    found = _DECODERS.get(tp)
    if found is None:
        found = _DECODERS[tp] = _build(tp)
    return found


def _build(tp: Any) -> Decoder:
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass_decoder(tp)
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return _literal_decoder(frozenset(typing.get_args(tp)))
    if origin in (typing.Union, types.UnionType):
        return _union_decoder(tp)
    if origin is tuple:
        return _tuple_decoder(tp)
    if origin is dict:
        return _dict_decoder(typing.get_args(tp)[1])
    if tp is Any:
        return _any
    if isinstance(tp, type):
        return _scalar_decoder(tp)
    raise TypeError(f"no decoder for {tp!r}")


def _exact_types(tp: Any) -> frozenset[type] | None:
    """JSON value types that decode to themselves for ``tp`` (None: not a plain scalar)."""
    if tp in (str, int, float, bool, NoneType):
        return frozenset((tp,))
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if all(arg in (str, int, float, bool, NoneType) for arg in args):
            return frozenset(args)
    return None


def _literal_values(tp: Any) -> frozenset[Any] | None:
    """The values a ``Literal[...]`` field may take (None: not a Literal)."""
    return frozenset(typing.get_args(tp)) if typing.get_origin(tp) is typing.Literal else None


def _literal_decoder(values: frozenset[Any]) -> Decoder:
    def decode_literal(data: Any) -> Any:
        # type() too: True == 1 and 1.0 == 1 must not pass for one another
        if data in values and any(type(data) is type(v) for v in values):
            return data
        raise _Mismatch(f"expected one of {sorted(map(repr, values))}, got {data!r}")

    return decode_literal


def _dataclass_decoder(cls: type) -> Decoder:
    hints = typing.get_type_hints(cls)
    # Literal fields: a plain shape holds their value types; each value is still checked.
    literals = tuple(
        (f.name, values)
        for f in dataclasses.fields(cls)
        if (values := _literal_values(hints[f.name])) is not None
    )
    # (name, the exact JSON types taken as they are, the field's decoder, required)
    fields = [
        (
            f.name,
            _exact_types(hints[f.name]) or frozenset(),
            _decoder(hints[f.name]),
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
        )
        for f in dataclasses.fields(cls)
    ]
    exact_of = {name: exact for name, exact, _, _ in fields}
    exact_of.update((name, frozenset(map(type, values))) for name, values in literals)
    # A plain object's literal values, picked in one C call and looked up in the set of every
    # allowed combination (KernelEntry: 3 kinds x 3 variants x 4 compressions).
    pick = operator.itemgetter(*(name for name, _ in literals)) if literals else None
    allowed: frozenset[Any] = (
        literals[0][1]
        if len(literals) == 1
        else frozenset(itertools.product(*(values for _, values in literals)))
    )
    # Shapes (key names, value types) of objects that have every field, each value of a type
    # taken as it is: most objects of a document share a few shapes, and such an object is built
    # from the data without a look at each field (as __init__ would, there being no __post_init__).
    plain: set[tuple[tuple[str, ...], tuple[type, ...]]] = set()
    direct = not hasattr(cls, "__post_init__")
    new = object.__new__

    def is_plain(names: tuple[str, ...], kinds: tuple[type, ...]) -> bool:
        return (
            direct
            and len(names) == len(exact_of)
            and all(kind in exact_of.get(name, ()) for name, kind in zip(names, kinds, strict=True))
        )

    def build(data: dict[str, Any]) -> Any:
        made: Any = new(cls)
        made.__dict__.update(data)
        return made

    def decode_object(data: Any) -> Any:
        if type(data) is not dict:
            raise _Mismatch("expected an object")
        shape = (tuple(data), tuple(map(type, data.values())))
        known = shape in plain
        if (known or (len(plain) < MAX_SHAPES and is_plain(*shape))) and (
            pick is None or pick(data) in allowed
        ):
            if not known:
                plain.add(shape)
            return build(data)
        kwargs = {}
        for name, exact, decode_field, needed in fields:
            if name in data:
                value = data[name]
                if type(value) in exact:
                    kwargs[name] = value
                    continue
                try:
                    kwargs[name] = decode_field(value)
                except _Mismatch as failure:
                    failure.path.append("." + name)
                    raise
            elif needed:
                raise _Mismatch(f"missing {name!r}")
        return cls(**kwargs)

    return decode_object


def _union_decoder(tp: Any) -> Decoder:
    optional = NoneType in typing.get_args(tp)
    variants = [_decoder(arg) for arg in typing.get_args(tp) if arg is not NoneType]

    def decode_union(data: Any) -> Any:
        if data is None and optional:
            return None
        for variant in variants:
            try:
                return variant(data)
            except _Mismatch:
                continue
        raise _Mismatch(f"no variant of {tp} matches")

    return decode_union


def _tuple_decoder(tp: Any) -> Decoder:
    args = typing.get_args(tp)
    if len(args) == 2 and args[1] is Ellipsis:
        item = _decoder(args[0])
        exact = _exact_types(args[0])

        def decode_items(data: Any) -> Any:
            if type(data) is not list:
                raise _Mismatch("expected an array")
            if exact is not None and all(type(v) in exact for v in data):
                return tuple(data)
            try:
                return tuple(map(item, data))
            except _Mismatch:  # decode again, one by one, to name the item
                return tuple(_at(item, i, v) for i, v in enumerate(data))

        return decode_items
    items = [_decoder(arg) for arg in args]

    def decode_fixed(data: Any) -> Any:
        if type(data) is not list:
            raise _Mismatch("expected an array")
        if len(data) != len(items):
            raise _Mismatch(f"expected {len(items)} items")
        return tuple(_at(d, i, v) for i, (d, v) in enumerate(zip(items, data, strict=True)))

    return decode_fixed


def _at(decode_item: Decoder, index: int, value: Any) -> Any:
    try:
        return decode_item(value)
    except _Mismatch as failure:
        failure.path.append(f"[{index}]")
        raise


def _dict_decoder(value_type: Any) -> Decoder:
    decode_value = _decoder(value_type)

    def decode_dict(data: Any) -> Any:
        if type(data) is not dict:
            raise _Mismatch("expected an object")
        result = {}
        for key, value in data.items():
            try:
                result[str(key)] = decode_value(value)
            except _Mismatch as failure:
                failure.path.append(f".{key}")
                raise
        return result

    return decode_dict


def _any(data: Any) -> Any:
    return data


def _scalar_decoder(tp: type) -> Decoder:
    def decode_scalar(data: Any) -> Any:
        if tp is float and isinstance(data, int) and not isinstance(data, bool):
            return float(data)
        if isinstance(data, tp) and not (tp is int and isinstance(data, bool)):
            return data
        raise _Mismatch(f"expected {tp.__name__}, got {type(data).__name__}")

    return decode_scalar
