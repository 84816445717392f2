"""A node's health (``results.NodeHealth``, decided by ``orchestrate.health``) as one line for
Slurm, NHC and readiness probes: ``OK`` or a stable reason.

``archgap: <code>: <package> <version> on <gpu>: <short why>``, at most ``MAX_LINE`` characters,
one line, with no quote, backslash, ``$`` or backtick: NHC hands a check's message to
``eval $OFFLINE_NODE "'$HOSTNAME'" "'$*'"`` (mej/nhc 1.4.3, ``nhc`` lines 61 and 64), where a
single quote ends the quoting and the rest is shell syntax. Renders only.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from archgap.results import NodeHealth

MAX_LINE = 200
PREFIX = "archgap:"


# What a shell reads as syntax even inside NHC's single quotes (the quote itself), or as an
# expansion or escape wherever else the line is pasted: an apostrophe becomes a typographic one,
# the rest is dropped.
_SHELL_SYNTAX = str.maketrans({"'": "\u2019", '"': None, "`": None, "$": None, "\\": "/"})


def one_line(text: str) -> str:
    """Whitespace and control characters collapsed to single spaces, shell syntax dropped."""
    return re.sub(r"[\s\x00-\x1f\x7f]+", " ", text.translate(_SHELL_SYNTAX)).strip()


def reason_line(code: str, subject: str, why: str, more: int = 0) -> str:
    """``archgap: CODE: SUBJECT: WHY (+N more)``, cut to MAX_LINE characters (the why is cut)."""
    head = one_line(f"{PREFIX} {code}: {subject}: " if subject else f"{PREFIX} {code}: ") + " "
    tail = f" (+{more} more)" if more else ""
    why = one_line(why)
    room = MAX_LINE - len(head) - len(tail)
    if len(why) > room:
        why = why[: max(room - 1, 0)].rstrip() + "…"
    return (head + why + tail)[:MAX_LINE]


def line(health: NodeHealth) -> str:
    """What ``scan --health`` prints and ``--drain`` gives scontrol as the reason."""
    if health.code == "ok":
        return "OK"
    return reason_line(health.code, health.subject, health.why, health.more)


def document(health: NodeHealth) -> dict[str, Any]:
    """The health as a JSON document (schema/health.schema.json): what the MCP tool returns."""
    from archgap.report.jsondoc import document as envelope

    body = {
        "code": health.code,
        "line": line(health),
        "exit_code": health.exit_code,
        "drains": health.drains,
        "judged": health.judged,
        "subject": health.subject,
        "why": health.why,
        "more": health.more,
        "gaps": health.gaps if health.judged else None,
        "verdicts": [asdict(v) for v in health.verdicts] if health.judged else [],
        "jit": [asdict(v) for v in health.jit] if health.judged else [],
    }
    return envelope("health", body)
