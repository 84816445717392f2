"""mkdocs hook: the CLI reference page is written from archgap's own parser at build time, so it
cannot drift from `archgap COMMAND --help` (the man page comes from the same parser)."""

from __future__ import annotations

import argparse
from typing import Any

PAGE = "reference/cli.md"
MARKER = "<!-- cli-reference -->"


def _option_row(action: argparse.Action) -> str:
    if action.help == argparse.SUPPRESS:
        return ""
    names = ", ".join(f"`{name}`" for name in action.option_strings) or f"`{action.dest}`"
    if action.metavar and action.option_strings:
        names += f" `{action.metavar}`"
    elif action.choices and action.option_strings and action.nargs != 0:
        names += " `{" + ",".join(map(str, action.choices)) + "}`"
    text = (action.help or "").replace("%(default)s", str(action.default)).replace("|", "\\|")
    text = text.replace("%%", "%").replace("\n", " ").replace("[", "\\[")
    return f"| {names} | {text} |"


def _command(name: str, parser: argparse.ArgumentParser) -> list[str]:
    lines = [f"## archgap {name}", "", parser.description or "", ""]
    usage = parser.format_usage().removeprefix("usage: ").strip()
    lines += ["```text", usage, "```", ""]
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if not isinstance(a, argparse._HelpAction)]
        rows = [row for row in map(_option_row, actions) if row]
        if not rows:
            continue
        lines += [f"**{group.title}**", "", "| option | meaning |", "|---|---|", *rows, ""]
    return lines


def reference() -> str:
    from archgap.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in subparsers._choices_actions}
    lines = ["| command | what it answers |", "|---|---|"]
    for name in subparsers.choices:
        lines.append(f"| [`{name}`](#archgap-{name}) | {helps.get(name, '')} |")
    lines.append("")
    for name, command in subparsers.choices.items():
        lines += _command(name, command)
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri == PAGE:
        return markdown.replace(MARKER, reference())
    return markdown
