"""mkdocs hook: the table of mined gate messages is written from archgap's own knowledge base
(``kb/gates.json``: its gates and its known messages) when the site is built, so the page cannot
drift from what ``explain`` recognises."""

from __future__ import annotations

from typing import Any

PAGE = "reference/gates.md"
MARKER = "<!-- gates-table -->"


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").replace("<", "&lt;").split("\n")).strip()


def _where(file: str, line: int, source: str) -> str:
    url = source.split()[0].rstrip(":")
    at = f"{file}:{line}" if line else file
    return f"[`{_cell(at)}`]({url})" if at else f"[source]({url})"


def table() -> str:
    from archgap.kb.gates import Gate, Known, load_gates, load_known

    # a gate of framework "any" read from a release (Thrust's words, printed by every program
    # that links it) is a mined message too; one without a release is a wording of the facts
    gates = [g for g in load_gates() if g.framework != "any" or g.release]
    wordings = [g for g in load_gates() if g not in gates]
    known = load_known()
    # a project: the top-level project whose released source prints the message (kb.gates
    # project_of: "vLLM (vllm_flash_attn)" is vLLM's, "NVRTC (numba-cuda)" numba-cuda's)
    mined: list[Gate | Known] = [*gates, *known]
    projects = sorted({r.project for r in mined} - {""}, key=str.lower)
    lines = [
        f"**{len(gates) + len(known)} messages** mined from the released source of "
        f"**{len(projects)} projects**: {len(gates)} decided by a gate rule, {len(known)} "
        f"recognised by an existing signature; and {len(wordings)} wordings of the facts "
        "that no one framework owns.",
        "",
        "Projects: " + ", ".join(projects) + ".",
        "",
        "| framework | release | file:line | message | rule or signature |",
        "|---|---|---|---|---|",
    ]
    rows = [
        (g.framework, g.release, _where(g.file, g.line, g.source), g.message, f"`{g.rule}`")
        for g in gates
    ] + [
        (
            k.framework,
            k.release,
            _where(k.file, k.line, k.source),
            k.message,
            f"known: `{k.signature}`",
        )
        for k in known
    ]
    for framework, release, where, message, rule in sorted(rows, key=lambda r: r[0].lower()):
        lines.append(
            f"| {_cell(framework)} | {_cell(release)} | {where} | {_cell(message)} | {rule} |"
        )
    lines += [
        "",
        "Facts in any wording (a line that carries a required capability, or a build's list, "
        "and the current one):",
        "",
        "| id | example | rule |",
        "|---|---|---|",
    ]
    for gate in wordings:
        lines.append(f"| `{gate.id}` | {_cell(gate.message)} | `{gate.rule}` |")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri == PAGE:
        return markdown.replace(MARKER, table())
    return markdown
