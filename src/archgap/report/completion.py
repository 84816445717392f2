"""Shell completion scripts (bash, zsh), generated from the command parsers themselves, so they
always know every command, option and choice."""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping

# Options whose value is a file or directory (completed as paths); others complete nothing.
PATH_OPTIONS = ("--python", "--hostfile", "--from", "--html", "--env-from", "--path", "--root")


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS]


def _values(action: argparse.Action) -> str:
    """What follows the option: 'FILE' (a path), a list of choices, '' (a flag) or '-' (text)."""
    if action.nargs == 0:
        return ""
    if action.choices:
        return " ".join(str(c) for c in action.choices)
    if any(o in PATH_OPTIONS for o in action.option_strings):
        return "FILE"
    return "-"


def bash_script(parsers: Mapping[str, argparse.ArgumentParser]) -> str:
    """The bash script for the commands ``parsers`` (by name): each one's options, and what
    follows each option (a path, its choices, or nothing to offer)."""
    cases = []
    by_kind: dict[str, list[str]] = {}  # what follows an option -> '"command --option"' patterns
    for name, parser in parsers.items():
        options = " ".join(o for a in _options(parser) for o in a.option_strings)
        cases.append(f'        {name}) opts="{options}" ;;')
        for action in _options(parser):
            kind = _values(action)
            if kind:
                by_kind.setdefault(kind, []).extend(f'"{name} {o}"' for o in action.option_strings)
    values = []
    for kind, patterns in sorted(by_kind.items()):
        if kind == "FILE":
            reply = 'COMPREPLY=($(compgen -f -- "$cur"))'
        elif kind == "-":
            reply = "COMPREPLY=()"
        else:
            reply = f'COMPREPLY=($(compgen -W "{kind}" -- "$cur"))'
        values.append(f"        {'|'.join(patterns)}) {reply}; return ;;")
    return BASH.format(commands=" ".join(parsers), cases="\n".join(cases), values="\n".join(values))


BASH = """# archgap bash completion: eval "$(archgap completion bash)"
_archgap() {{
    local cur prev opts
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "{commands} --help --version" -- "$cur"))
        return
    fi
    case "${{COMP_WORDS[1]}} $prev" in
{values}
    esac
    case "${{COMP_WORDS[1]}}" in
{cases}
        *) opts="" ;;
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}}
complete -o filenames -F _archgap archgap
"""


def _zsh_quote(text: str) -> str:
    return text.replace("'", "'\\''").replace("[", "\\[").replace("]", "\\]").replace(":", "\\:")


def _zsh_spec(action: argparse.Action) -> list[str]:
    """_arguments specs for one option: '*--gpu[help]:GPU:' and the like."""
    plain = re.sub(r"\s*\(default %\(default\)\w\)|%\(default\)\w", "", str(action.help or ""))
    help_text = _zsh_quote(plain.replace("\n", " "))
    values = _values(action)
    repeat = "*" if isinstance(action, (argparse._AppendAction, argparse._CountAction)) else ""
    tail = ""
    if values == "FILE":
        tail = ":path:_files"
    elif values == "-":
        tail = f":{_zsh_quote(str(action.metavar or action.dest))}:"
    elif values:
        tail = f":value:({values})"
    return [f"'{repeat}{option}[{help_text}]{tail}'" for option in action.option_strings]


def zsh_script(parsers: Mapping[str, argparse.ArgumentParser], helps: Mapping[str, str]) -> str:
    """The zsh script for the commands ``parsers`` (by name), each described by ``helps``."""
    described = " ".join(f"'{name}:{_zsh_quote(helps.get(name, ''))}'" for name in parsers)
    cases = []
    for name, parser in parsers.items():
        specs = [s for a in _options(parser) for s in _zsh_spec(a)]
        positional = any(not a.option_strings for a in parser._actions)
        specs.append("'*:file:_files'" if positional else "")
        cases.append(f"        {name}) _arguments -s {' '.join(s for s in specs if s)} ;;")
    return ZSH.format(commands=described, cases="\n".join(cases))


ZSH = """#compdef archgap
# archgap zsh completion: eval "$(archgap completion zsh)" after compinit
_archgap() {{
    local -a commands
    commands=({commands})
    if (( CURRENT == 2 )); then
        _describe 'command' commands
        return
    fi
    words=("${{(@)words[2,-1]}}")
    (( CURRENT-- ))
    case $words[1] in
{cases}
    esac
}}
compdef _archgap archgap
"""
