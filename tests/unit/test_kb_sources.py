"""Every ``source`` in the knowledge base can be followed: a file it names that is not an upstream
project's (a note, another kb file) must be in this repository, not in someone's working notes."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

KB = Path(__file__).resolve().parents[2] / "src" / "archgap" / "kb"
REPO = KB.parents[2]
# What a source names in this repository: a kb file, or a markdown note (upstream projects are
# cited by URL, issue number or their own paths such as flashinfer/jit/core.py).
LOCAL_NAME = re.compile(r"(?<![\w/.])(kb/[\w.-]+\.json|[\w./-]+\.md)\b")
URL = re.compile(r"https?://\S+")  # an upstream page, whatever its path ends in


def local_names(text: str) -> list[str]:
    return LOCAL_NAME.findall(URL.sub(" ", text))


def _sources(node: Any, where: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, str) and (key == "source" or key.endswith("_source")):
                yield f"{where}.{key}", value
            else:
                yield from _sources(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _sources(value, f"{where}[{i}]")


def _all_sources() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for path in sorted(KB.glob("*.json")):
        found.extend(_sources(json.loads(path.read_text(encoding="utf-8")), path.name))
    return found


def _resolves(name: str) -> bool:
    if name.startswith("kb/"):
        return (KB / name[3:]).is_file()
    return (REPO / name).is_file()  # a note is cited by its path from the repository root


def test_the_knowledge_base_has_sources() -> None:
    sources = _all_sources()
    assert len(sources) > 100  # the gpus, toolkits, drivers, jit and signatures tables all cite
    assert all(text.strip() for _, text in sources)


def test_a_source_cites_public_places_only() -> None:
    # Sources are shown to users (scan's chains, explain's fixes): a public URL, an upstream
    # path or issue, never an id in a private search index that nobody else can follow.
    private = [where for where, text in _all_sources() if "search index" in text]
    assert not private, private


@pytest.mark.parametrize(
    ("where", "text"), [s for s in _all_sources() if local_names(s[1])], ids=lambda v: v
)
def test_a_local_file_a_source_names_is_in_the_repository(where: str, text: str) -> None:
    missing = [m for m in local_names(text) if not _resolves(m)]
    assert not missing, f"{where} cites {missing}, which this repository does not have"


def test_the_check_catches_a_note_outside_the_repository() -> None:
    assert local_names("stack_gates.md 1.1 (flashinfer tags)") == ["stack_gates.md"]
    assert not local_names("https://github.com/filecoin-project/bellperson/blob/v0.27.0/README.md")
    assert not _resolves("stack_gates.md")
    assert _resolves("kb/drivers.json")
