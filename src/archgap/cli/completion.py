"""archgap completion bash|zsh: a shell completion script, generated from the parser itself (so
it always knows every command, option and choice).

    eval "$(archgap completion bash)"      # in ~/.bashrc
    eval "$(archgap completion zsh)"       # in ~/.zshrc, after compinit
"""

from __future__ import annotations

import argparse
import re
import sys

from archgap.cli import options as opt
from archgap.cli.common import EXIT_OK, Output

# Options whose value is a file or directory (completed as paths); others complete nothing.
PATH_OPTIONS = ("--python", "--hostfile", "--from", "--html", "--env-from", "--path", "--root")


HELP = "print a bash or zsh completion script"
DESCRIPTION = (
    'Print a completion script: eval "$(archgap completion bash)" in ~/.bashrc, or eval '
    '"$(archgap completion zsh)" in ~/.zshrc after compinit.'
)
OPTIONS = (opt.option("shell", choices=("bash", "zsh")),)


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser, by name."""
    from archgap.cli import build_parser

    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sorted(action.choices.items()))


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


def bash_script() -> str:
    parsers = commands()
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


def zsh_script() -> str:
    parsers = commands()
    described = " ".join(f"'{name}:{_zsh_quote(_help_of(name))}'" for name in parsers)
    cases = []
    for name, parser in parsers.items():
        specs = [s for a in _options(parser) for s in _zsh_spec(a)]
        positional = any(not a.option_strings for a in parser._actions)
        specs.append("'*:file:_files'" if positional else "")
        cases.append(f"        {name}) _arguments -s {' '.join(s for s in specs if s)} ;;")
    return ZSH.format(commands=described, cases="\n".join(cases))


def _help_of(name: str) -> str:
    from archgap.cli import build_parser

    parser = build_parser([name])
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for choice in action._choices_actions:
        if choice.dest == name:
            return str(choice.help or "")
    return ""


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


def run(args: argparse.Namespace, out: Output) -> int:
    sys.stdout.write(bash_script() if args.shell == "bash" else zsh_script())
    return EXIT_OK
