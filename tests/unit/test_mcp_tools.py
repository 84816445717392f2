"""How a tool's typed api result becomes its document (archgap.mcp.tools): the command's report
module renders it, and the command's JSON Schema decides whether it may be returned."""

from __future__ import annotations

import importlib

import pytest

from archgap import api
from archgap.mcp.tools import BODY_INPUTS, CHANGING, READ_ONLY, DocumentError, document
from archgap.results import FixResult

FIX = next(spec for spec in READ_ONLY if spec.name == "fix")


def test_every_tool_has_an_api_function_and_a_renderer() -> None:
    for spec in (*READ_ONLY, *CHANGING):
        assert callable(getattr(api, spec.function)), spec.name
        rendering = importlib.import_module(f"archgap.report.{spec.command}")
        made_by = "body" if spec.command in BODY_INPUTS else "document"
        assert hasattr(rendering, made_by) or hasattr(rendering, "body"), spec.name


def test_a_typed_result_is_its_commands_document() -> None:
    plan = FixResult(python="/srv/venv/bin/python", gap=False, notes=("nothing to fix",))
    doc = document(FIX, plan, {}, 0.1)
    assert (doc["command"], doc["python"], doc["notes"]) == ("fix", plan.python, ["nothing to fix"])
    assert doc["schema_version"] and doc["applied"] is None


def test_a_document_outside_its_schema_is_refused_with_where() -> None:
    # fix.schema.json: an action is an object with its kind, change and findings, nothing else.
    broken = FixResult(gap=True, actions=({"kind": "env", "colour": "red"},))
    with pytest.raises(DocumentError, match="fix document does not follow its schema at actions/0"):
        document(FIX, broken, {}, 0.1)


def test_results_are_sent_once_and_as_text_too_only_to_older_clients() -> None:
    """MCP 2025-06-18 brought structured results; it asks for the JSON as text too "for
    backwards compatibility": a client of an earlier revision gets it, a newer one the
    structured document once, beside the one-line summary."""
    import json

    from archgap.mcp.server import STRUCTURED_SINCE, Toolbox, result_of

    toolbox = Toolbox()
    arguments = {"names": ["H100"]}
    new = result_of(toolbox, "gpus", arguments, lambda *a: None, protocol_version=STRUCTURED_SINCE)
    (line,) = [c.text for c in new.content]
    assert line.startswith("archgap gpus: 1 GPU(s): ") and line.endswith(" 9.0 (Hopper)")
    assert new.structured_content["gpus"][0]["compute_capability"] == "9.0"
    old = result_of(toolbox, "gpus", arguments, lambda *a: None, protocol_version="2025-03-26")
    assert len(old.content) == 2 and json.loads(old.content[1].text) == old.structured_content
