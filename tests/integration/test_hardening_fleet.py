"""A malformed host document is that host's problem: the others are still reported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers import json_output, run_cli


def test_malformed_documents_are_unreadable_hosts_and_the_rest_is_reported(
    tmp_path: Path,
) -> None:
    probe = run_cli("probe", "--sections", "gpu", "--json")
    assert probe.returncode == 0, probe.stderr
    good = json.loads(probe.stdout)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "good.json").write_text(probe.stdout)

    def broken(name: str, **facts: Any) -> None:
        doc = json.loads(probe.stdout)
        doc["target"] = name
        doc["facts"].update(facts)
        (inbox / f"{name}.json").write_text(json.dumps(doc))

    broken("errors-list", errors=["x"])
    broken("sections-int", sections=5)
    broken("binaries-int", sections={**good["facts"]["sections"], "binaries": 5})
    deep = '{"command": "probe", "target": "deep", "facts": ' + "[" * 100000 + "]" * 100000 + "}"
    (inbox / "deep.json").write_text(deep)

    result = run_cli("fleet", "--from", str(inbox), "--gpu", "T4", "--json")
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    doc = json_output(result, "fleet")
    assert [h["name"] for h in doc["hosts"]] == [good["facts"]["host"]]
    reasons = {u["name"]: (u["kind"], u["message"]) for u in doc["unreachable"]}
    assert reasons == {
        "errors-list": ("unreadable", "'errors' is list, not an object"),
        "sections-int": ("unreadable", "'sections' is int, not an object"),
        "binaries-int": ("unreadable", "section 'binaries' is int"),
        str(inbox / "deep.json"): ("not-json", "JSON nested deeper than the parser goes"),
    }
