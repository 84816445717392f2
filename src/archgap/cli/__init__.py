"""The command line: one module per command; the only layer that prints.

Exit codes (documented in the README):
  0  no gap found
  1  a gap was found (a package cannot run on a GPU that is present or required)
  2  usage error, or the facts could not be collected
  fix adds 3 (refused); explain its own 3 (an error it cannot explain) and 4 (a known error that
  is not an architecture gap): Diagnosis.exit_code
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from archgap import __version__
from archgap.cli.common import EXIT_ERROR, Output, UsageError, choose_python, redact_output
from archgap.cli.options import add_command
from archgap.errors import ProbeError

# Each name is a module archgap.cli.<name> (a dash in the name is an underscore in the module)
# that declares HELP, DESCRIPTION and OPTIONS (see cli.options.add_command) and has
# run(args, out) -> int.
COMMANDS = (
    "scan",
    "versions",
    "matrix",
    "kernels",
    "explain",
    "probe",
    "fleet",
    "trace",
    "gates",
    "gpus",
    "verify",
    "k8s-manifest",
    "recipe",
    "fix",
    "mcp",
    "completion",
)


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser; when ``argv`` names a command, only that command's module is imported."""
    parser = argparse.ArgumentParser(
        prog="archgap",
        description="Will this Python GPU stack run on this GPU? If not: exactly why, and the fix.",
    )
    parser.add_argument("--version", action="version", version=f"archgap {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    named = next((a for a in argv if not a.startswith("-")), None)
    for name in (named,) if named in COMMANDS else COMMANDS:
        module = importlib.import_module(f"archgap.cli.{name.replace('-', '_')}")
        add_command(subparsers, name, module)
    for command in subparsers.choices.values():
        command.set_defaults(command_parser=command)
        add_common_options(command)
    return parser


def add_common_options(command: argparse.ArgumentParser) -> None:
    """-q/-v on every command; --no-config where a config file can set defaults."""
    from archgap.config import COMMANDS as CONFIGURED
    from archgap.config import KEYS

    group = command.add_argument_group("output detail")
    group.add_argument(
        "-q", "--quiet", action="store_true", help="no warnings or progress (errors still show)"
    )
    group.add_argument(
        "--redact",
        action="store_true",
        help="replace user names in home paths and this host's name in all output (for sharing)",
    )
    group.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="say on stderr which interpreter, settings and target are used and how long each "
        "step took; -vv also shows the traceback of an internal error",
    )
    if command.prog.rsplit(" ", 1)[-1] in CONFIGURED:
        settable = ", ".join(KEYS)
        command.add_argument(
            "--no-config",
            action="store_true",
            help=f"ignore [tool.archgap] in pyproject.toml and ~/.config/archgap/config.toml "
            f"({settable})",
        )


def parse(arguments: list[str]) -> argparse.Namespace:
    """The arguments; an unknown option is reported with the usage of the command it was given
    to (not the top level's), and the closest option that command has."""
    parser = build_parser(arguments)
    args, extra = parser.parse_known_args(arguments)
    if extra:
        import difflib

        command: argparse.ArgumentParser = getattr(args, "command_parser", parser)
        message = f"unrecognized arguments: {' '.join(extra)}"
        options = list(command._option_string_actions)
        close = difflib.get_close_matches(extra[0].split("=")[0], options, n=1, cutoff=0.75)
        command.error(message + (f" (did you mean {close[0]}?)" if close else ""))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    args = parse(arguments)
    choose_python(args)
    if getattr(args, "redact", False):
        redact_output()
    out = Output.for_args(args)
    try:
        configured = apply_config(args, out)
        if configured:
            out.note(f"settings from {configured}")
        if getattr(args, "python_source", ""):
            out.note(f"inspecting {args.python or 'python3'} ({args.python_source})")
        code: int = args.run(args, out)
        return code
    except (UsageError, ProbeError) as exc:
        out.error(str(exc))
        return EXIT_ERROR
    except KeyboardInterrupt:
        out.error("interrupted")
        return 130
    except BrokenPipeError:  # `archgap ... | head`: the reader has all it wants
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # the user gets one line, never a traceback (ARCHGAP_DEBUG=1 shows it)
        if os.environ.get("ARCHGAP_DEBUG") or out.verbosity > 1:
            raise
        out.error(f"internal error: {type(exc).__name__}: {exc} (set ARCHGAP_DEBUG=1 for details)")
        return EXIT_ERROR


def apply_config(args: argparse.Namespace, out: Output) -> str:
    """The config file's settings for the options the command line left at their defaults (an
    option given wins); which file was used ("" when none applied). -v says which config applied
    or why none did; a file passed over as another user's is a warning."""
    if getattr(args, "no_config", False):
        out.note("config: none (--no-config)")
        return ""
    from archgap.config import settings

    found, values = settings(getattr(args, "command", ""))
    out.note(found.describe())
    for why in [] if out.quiet else found.ignored:
        sys.stderr.write(f"archgap: warning: config ignored: {why}\n")
    path = found.path
    given = {attr: value for attr, value in values.items() if hasattr(args, attr)}
    unset = {attr: value for attr, value in given.items() if not getattr(args, attr)}
    for attr, value in unset.items():
        setattr(args, attr, value)
    return path if unset else ""


if __name__ == "__main__":
    sys.exit(main())
