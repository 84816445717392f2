"""Shared data model: the probe's facts (re-exported) and JSON decoding back into them.

The probe serialises its frozen dataclasses with ``dataclasses.asdict``; ``decode`` rebuilds them
from JSON using their type hints, so a fact collected on another host becomes the same value as
one collected here.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, TypeVar

from archgap.probe.facts import (
    BinaryFacts,
    Distribution,
    Gpu,
    GpuFacts,
    KernelEntry,
    Problem,
    PythonEnvironment,
)

__all__ = [
    "BinaryFacts",
    "DecodeError",
    "Distribution",
    "Gpu",
    "GpuFacts",
    "KernelEntry",
    "Problem",
    "PythonEnvironment",
    "decode",
    "to_json",
]

T = TypeVar("T")


class DecodeError(ValueError):
    """JSON that does not match the facts' shape."""


def to_json(value: Any) -> Any:
    """A dataclass (or tuple of them) as plain JSON data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    return value


def decode(cls: type[T], data: Any) -> T:
    """Rebuild a frozen dataclass from JSON data, checking types on the way."""
    return typing.cast(T, _decode(cls, data, cls.__name__))


def _decode(tp: Any, data: Any, where: str) -> Any:  # noqa: C901 (over the ratchet; to split)
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(data, dict):
            raise DecodeError(f"{where}: expected an object")
        hints = typing.get_type_hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in data:
                kwargs[f.name] = _decode(hints[f.name], data[f.name], f"{where}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise DecodeError(f"{where}: missing {f.name!r}")
        return tp(**kwargs)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if data is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _decode(arg, data, where)
            except DecodeError:
                continue
        raise DecodeError(f"{where}: no variant of {tp} matches")
    if origin is tuple:
        if not isinstance(data, list):
            raise DecodeError(f"{where}: expected an array")
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v, f"{where}[{i}]") for i, v in enumerate(data))
        if len(args) != len(data):
            raise DecodeError(f"{where}: expected {len(args)} items")
        return tuple(
            _decode(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, data, strict=True))
        )
    if origin is dict:
        if not isinstance(data, dict):
            raise DecodeError(f"{where}: expected an object")
        _, value_type = typing.get_args(tp)
        return {str(k): _decode(value_type, v, f"{where}.{k}") for k, v in data.items()}
    if tp is Any:
        return data
    if tp is float and isinstance(data, int) and not isinstance(data, bool):
        return float(data)
    if isinstance(tp, type) and isinstance(data, tp) and not (tp is int and isinstance(data, bool)):
        return data
    raise DecodeError(f"{where}: expected {getattr(tp, '__name__', tp)}, got {type(data).__name__}")
