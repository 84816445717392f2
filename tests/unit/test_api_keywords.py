"""Every public function of ``archgap.api`` takes its first parameter by position and every other
one by keyword only, so a call reads the same in the CLI, the MCP server and a user's script."""

from __future__ import annotations

import inspect

from archgap import api


def test_public_functions_are_keyword_only_after_the_first() -> None:
    functions = [getattr(api, name) for name in api.__all__]
    functions = [f for f in functions if inspect.isfunction(f)]
    assert len(functions) >= 10
    for function in functions:
        parameters = list(inspect.signature(function).parameters.values())[1:]
        positional = [p.name for p in parameters if p.kind is not inspect.Parameter.KEYWORD_ONLY]
        assert positional == [], (function.__name__, positional)
