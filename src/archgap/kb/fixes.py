"""Fix texts as templates (``fixes.json``): one place that words what a check tells the user to
do, with the fields the check fills in."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from archgap.kb import load_json


@dataclass(frozen=True)
class FixTemplate:
    key: str
    text: str  # "install an R{last_branch} driver (...)"
    source: str  # the rule the fix follows


@cache
def templates() -> dict[str, FixTemplate]:
    return {
        key: FixTemplate(key, entry["text"], entry["source"])
        for key, entry in load_json("fixes.json")["fixes"].items()
    }


def fix_text(key: str, **fields: object) -> str:
    """The fix ``key`` with its fields filled in. A field the template names and the caller
    does not give raises ``KeyError``: a template is never shown with a blank."""
    return templates()[key].text.format_map(fields)
