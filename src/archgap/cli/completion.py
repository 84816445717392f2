"""archgap completion bash|zsh: a shell completion script, generated from the parser itself (so
it always knows every command, option and choice).

    eval "$(archgap completion bash)"      # in ~/.bashrc
    eval "$(archgap completion zsh)"       # in ~/.zshrc, after compinit
"""

from __future__ import annotations

import argparse
import sys

from archgap.cli import options as opt
from archgap.cli.common import EXIT_OK, Output

HELP = "print a bash or zsh completion script"
DESCRIPTION = (
    'Print a completion script: eval "$(archgap completion bash)" in ~/.bashrc, or eval '
    '"$(archgap completion zsh)" in ~/.zshrc after compinit.'
)
OPTIONS = (opt.option("shell", choices=("bash", "zsh")),)


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.cli import build_parser
    from archgap.report import completion

    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    parsers = dict(sorted(action.choices.items()))
    if args.shell == "bash":
        sys.stdout.write(completion.bash_script(parsers))
    else:
        helps = {choice.dest: str(choice.help or "") for choice in action._choices_actions}
        sys.stdout.write(completion.zsh_script(parsers, helps))
    return EXIT_OK
