"""Fix texts as templates (``fixes*.json``): one place that words what a check tells the user to
do, why, and the command, with the fields the check fills in."""

from __future__ import annotations

import string
from dataclasses import dataclass
from functools import cache

from archgap.kb import load_json


@dataclass(frozen=True)
class FixTemplate:
    key: str
    text: str  # "install an R{last_branch} driver (...)"
    why: str  # "" where the fix says no more
    command: str  # "" where none applies
    source: str  # the rule the fix follows

    def fields(self) -> frozenset[str]:
        """Every field its parts name."""
        parts = (self.text, self.why, self.command)
        return frozenset(f for part in parts for _, f, _, _ in string.Formatter().parse(part) if f)


@dataclass(frozen=True)
class FixWords:
    text: str
    why: str
    command: str | None


# By subject: the checks, the frameworks' gates, explain's rules, the JIT models.
FILES = ("fixes.json", "fixes_gates.json", "fixes_explain.json", "fixes_jit.json")


@cache
def templates() -> dict[str, FixTemplate]:
    """Every template of the FILES; a key two files define is an error, not a silent override."""
    found: dict[str, FixTemplate] = {}
    for name in FILES:
        for key, e in load_json(name)["fixes"].items():
            if key in found:
                raise ValueError(f"kb/{name}: fix template {key!r} is defined twice")
            found[key] = FixTemplate(
                key, e["text"], e.get("why", ""), e.get("command", ""), e["source"]
            )
    return found


def fix_words(key: str, **fields: object) -> FixWords:
    """The fix ``key``'s text, why and command with its fields filled in. A field a part names
    and the caller does not give raises ``KeyError``: a template is never shown with a blank."""
    template = templates()[key]
    command = template.command.format_map(fields) if template.command else None
    return FixWords(template.text.format_map(fields), template.why.format_map(fields), command)


def fix_text(key: str, **fields: object) -> str:
    """The fix ``key``'s text alone (a template without a why)."""
    return fix_words(key, **fields).text
