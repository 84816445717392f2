"""Tool inputs derived from a function's keyword parameters (archgap.mcp.schema), on functions
written here with the kinds of parameter the api has."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from archgap.mcp.schema import ArgumentError, bind, derive
from archgap.transport.target import LOCAL, Target


@dataclass(frozen=True)
class Place:
    python: str | None = None
    target: Target = LOCAL
    env_from: str | None = None
    root: str = "/"


def examine(
    log: str,
    *,
    gpus: Sequence[str] = (),
    strict: bool = False,
    jobs: int = 4,
    timeout: float = 120.0,
    where: Place | None = Place(),
    progress: Callable[[int, int, str], None] | None = None,
    root: str = "/",
) -> None:
    """A function shaped like the api's."""


def test_each_keyword_is_a_property_of_its_json_type() -> None:
    derived = derive(examine, supplied=frozenset({"progress"}))
    properties = derived.schema["properties"]
    assert properties["log"] == {"type": "string"}
    assert properties["gpus"] == {"type": "array", "items": {"type": "string"}, "default": []}
    assert properties["strict"] == {"type": "boolean", "default": False}
    assert properties["jobs"] == {"type": "integer", "default": 4}
    assert properties["timeout"] == {"type": "number", "default": 120.0}
    # The dataclass's fields, and the target as the four ways of naming one.
    assert {"python", "env_from", "host", "container", "pod", "via"} <= set(properties)
    # Not offered: the recorded-tree root (test-only) and the callback the server fills.
    assert "root" not in properties and "progress" not in properties and "where" not in properties
    assert derived.schema["required"] == ["log"] and derived.supplied == ("progress",)
    assert derived.schema["additionalProperties"] is False


def test_arguments_bind_to_the_keywords() -> None:
    derived = derive(examine)
    keywords = bind(derived, {"log": "x", "gpus": ["H100"], "python": "/v/bin/python"})
    assert keywords == {"log": "x", "gpus": ("H100",), "where": Place(python="/v/bin/python")}
    remote = bind(derived, {"log": "x", "host": "gpu01", "python": "/v/bin/python"})["where"]
    assert remote.target.kind == "ssh" and remote.target.python == "/v/bin/python"
    # No field of an optional dataclass given: None, not the function's default.
    assert bind(derived, {"log": "x"}) == {"log": "x", "where": None}


def test_a_target_named_twice_or_an_unknown_argument_is_refused() -> None:
    derived = derive(examine)
    with pytest.raises(ArgumentError, match="host and pod"):
        bind(derived, {"log": "x", "host": "a", "pod": "b"})
    with pytest.raises(ArgumentError, match="unknown argument colour"):
        bind(derived, {"log": "x", "colour": "red"})


def test_a_required_keyword_without_a_json_form_is_an_error() -> None:
    def needs(callback: Callable[[], None]) -> None: ...

    with pytest.raises(TypeError, match="no JSON form"):
        derive(needs)


@dataclass(frozen=True)
class Read:
    """A richer form of a parameter (explain's LogInput: a long log's start and end)."""

    head: str
    tail: str = ""


def explain_like(log: str | Read, *, driver: str | None = None) -> None:
    """A function shaped like api.explain: the log as text, or as read in parts."""


def test_a_parameter_with_a_richer_form_is_offered_as_its_plain_type() -> None:
    # A tool call sends JSON: of `str | Read` it can send only the string, so that is the
    # property (required: no default), and the call gets the string as is.
    derived = derive(explain_like)
    assert derived.schema["properties"]["log"] == {"type": "string"}
    assert derived.schema["required"] == ["log"]
    assert bind(derived, {"log": "RuntimeError: x", "driver": "570.124.06"}) == {
        "log": "RuntimeError: x",
        "driver": "570.124.06",
    }
