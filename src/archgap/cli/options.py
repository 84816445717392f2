"""The commands' options, declared once: each command lists what it takes, one item a group.

An ``Option`` is one ``add_argument`` call kept as a value; a ``Group`` is options added together
(under a title in --help, and/or one at most). A command module declares ``OPTIONS``, in --help's
order; the groups several commands share (where to look, which interpreter, the output format)
are named here, so a command lists ``..., ENVIRONMENT, output(TABLE_FORMATS), TARGET`` instead
of repeating their add_argument calls; an option that a few commands share with their own help
text is a function of that text (``gpu_option``, ``require_option``, ``env_from_option``).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from archgap.transport.target import DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from archgap.index.options import IndexOptions

Parser = argparse.ArgumentParser | argparse._ArgumentGroup | argparse._MutuallyExclusiveGroup

TABLE_FORMATS = ("text", "json", "markdown", "csv")
# scan and fleet also have a one-line summary (dashboards, chat notifications, a CI job's title).
SUMMARY_FORMATS = (*TABLE_FORMATS, "summary")


@dataclass(frozen=True)
class Option:
    """One argument: its names (or positional name) and ``add_argument``'s keywords."""

    names: tuple[str, ...]
    settings: Mapping[str, Any] = field(default_factory=dict)

    def add(self, parser: Parser) -> None:
        parser.add_argument(*self.names, **self.settings)


@dataclass(frozen=True)
class Group:
    """Options added together: under ``title`` in --help (a command's own groups: argparse does
    not nest titled groups), and/or ``exclusive`` (one at most; ``required``: exactly one)."""

    items: tuple[Option | Group, ...]
    title: str = ""
    exclusive: bool = False
    required: bool = False

    def add(self, parser: Parser) -> None:
        target: Parser = parser
        if self.title and isinstance(parser, argparse.ArgumentParser):
            target = parser.add_argument_group(self.title)
        if self.exclusive:
            target = target.add_mutually_exclusive_group(required=self.required)
        for item in self.items:
            item.add(target)


@dataclass(frozen=True)
class Defaults:
    """Values an option does not set (``parser.set_defaults``)."""

    values: Mapping[str, Any]

    def add(self, parser: Parser) -> None:
        assert isinstance(parser, argparse.ArgumentParser), "defaults belong to a command"
        parser.set_defaults(**self.values)


Item = Option | Group | Defaults


def add_command(subparsers: Any, name: str, module: Any) -> argparse.ArgumentParser:
    """The command ``name`` as its module declares it: ``HELP`` (one line in the list of
    commands), ``DESCRIPTION`` (its --help), ``OPTIONS`` (in --help's order) and ``run``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=module.HELP, description=module.DESCRIPTION
    )
    add_options(parser, *module.OPTIONS, Defaults({"run": module.run}))
    return parser


def add_options(parser: Parser, *items: Item) -> None:
    """Add the options and groups, in this order (the order --help and completion show)."""
    for item in items:
        item.add(parser)


def option(*names: str, **settings: Any) -> Option:
    return Option(names, settings)


def flag(name: str, help: str, **settings: Any) -> Option:
    """An on/off option (``store_true``)."""
    return Option((name,), {"action": "store_true", "help": help, **settings})


def repeated(name: str, metavar: str, help: str, **settings: Any) -> Option:
    """An option that may be given many times; its values in a list (empty by default)."""
    return Option(
        (name,), {"action": "append", "default": [], "metavar": metavar, "help": help, **settings}
    )


class _Listed(argparse.Action):
    """Each use adds its comma-separated values, stripped, to one list: ``--gpu H100,B200
    --gpu 12.0`` is ``["H100", "B200", "12.0"]``."""

    def __call__(
        self, parser: Any, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        current = getattr(namespace, self.dest, None)
        items = [] if current is self.default else list(current or [])  # a default is replaced
        items.extend(v.strip() for v in str(values).split(",") if v.strip())
        setattr(namespace, self.dest, items)


def listed(name: str, metavar: str, help: str, **settings: Any) -> Option:
    """A repeatable option of comma-separated values (the one type of such lists)."""
    return Option(
        (name,), {"action": _Listed, "default": [], "metavar": metavar, "help": help, **settings}
    )


class _Deprecated(argparse.Action):
    """An old name of an option: it still works, and says on stderr which name to use."""

    def __init__(self, *args: Any, replacement: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.replacement = replacement

    def __call__(
        self, parser: Any, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        import sys

        sys.stderr.write(f"archgap: {option} is deprecated: use {self.replacement}\n")
        setattr(namespace, self.dest, values)


def deprecated(name: str, replacement: Option) -> Option:
    """``name``: the old, deprecated name of ``replacement`` (so said in --help)."""
    new = replacement.names[0]
    settings = {k: v for k, v in replacement.settings.items() if k in ("dest", "metavar")}
    return Option(
        (name,),
        {**settings, "action": _Deprecated, "replacement": new, "help": f"deprecated: use {new}"},
    )


def one_of(*items: Option, required: bool = False) -> Group:
    return Group(items, exclusive=True, required=required)


def hidden(name: str, **settings: Any) -> Option:
    """An option for tests and offline analysis, not shown in --help or completion."""
    return Option((name,), {**settings, "help": argparse.SUPPRESS})


def gpu_option(help: str) -> Option:
    """``--gpu GPU``, repeatable, comma-separated: a compute capability or a product name."""
    return listed("--gpu", "GPU", help)


def require_option(help: str) -> Option:
    """``--require GPU``, repeatable, comma-separated: a GPU that must be served (exit 1
    otherwise)."""
    return listed("--require", "GPU", help)


def env_from_option(help: str) -> Option:
    """``--env-from PID|FILE``: reads a service's environment, used instead of the shell's (it
    never writes one: ``fix --write-env-file`` does)."""
    return option("--env-from", metavar="PID|FILE", help=help)


def from_option(help: str, **settings: Any) -> Option:
    """``--from DIR|FILE``, repeatable: probe documents, as ``fleet --from`` reads them."""
    return option(
        "--from", dest="from_paths", action="append", metavar="DIR|FILE", help=help, **settings
    )


def sections_option(default: tuple[str, ...], help: str) -> Option:
    """``--sections``: the probe's sections to collect, repeatable, comma-separated."""
    return listed(
        "--sections", "LIST", f"{help} (default {','.join(default)})", default=list(default)
    )


# scan and kernels: one meaning of --strict (analysis.scan.fails, analysis.recipe.gate).
STRICT = flag(
    "--strict",
    "with --require (scan: or --gpu): only SASS counts; a library whose code for the GPU is PTX "
    "only (JIT-compiled at load) fails, as does one without code for it or that could not be read",
)


def show_all_option(what: str) -> Option:
    """``--all``: what a command leaves out by default (with a count), shown."""
    return flag("--all", f"show what is left out by default: {what}", dest="show_all")


def _boolean(text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false", "1", "0", "yes", "no"):
        raise argparse.ArgumentTypeError(f"{text!r} is not true or false")
    return value in ("true", "1", "yes")


# docker:// registries: ``--tls-verify=false`` is skopeo's flag (a registry without a verified
# certificate, or over plain HTTP; a loopback registry always may); credentials go to a token
# realm on another host only when asked.
REGISTRY = Group(
    (
        option(
            "--tls-verify",
            type=_boolean,
            default=True,
            metavar="BOOL",
            help="docker:// images: require HTTPS with a verified certificate (default true; "
            "false also allows plain HTTP, as skopeo's flag; loopback registries always may)",
        ),
        flag(
            "--trust-token-realm",
            "docker:// images: send your registry credentials to a token server on another "
            "host too (over https only; by default only the registry's own host gets them)",
        ),
    )
)


# gates and trace: the trees a scan of source leaves out unless asked.
ALL_TREES = show_all_option("vendored, example and test trees")


def output(formats: tuple[str, ...] = ("text", "json")) -> Group:
    """``--format`` (the first of ``formats`` by default) and ``--json``, the alias of
    ``--format json``."""
    return Group(
        (
            option(
                "--format",
                choices=formats,
                default=formats[0],
                help=f"output format (default {formats[0]}; json follows a versioned schema)",
            ),
            option(
                "--json",
                dest="format",
                action="store_const",
                const="json",
                help="print one JSON document (versioned schema): --format json",
            ),
        )
    )


ENVIRONMENT = Group(
    (
        option(
            "--python",
            metavar="PATH",
            help="inspect the environment of this interpreter (default: the active VIRTUAL_ENV or "
            "CONDA_PREFIX, else python3 on PATH; on a remote target python3 there)",
        ),
        # A recorded system tree instead of / (tests and offline analysis of a captured machine).
        hidden("--root", default="/"),
    )
)


def timeouts(timeout_default: float = DEFAULT_TIMEOUT) -> Group:
    """``--connect-timeout`` (ssh) and ``--timeout`` (total, per target)."""
    return Group(
        (
            option(
                "--connect-timeout",
                type=float,
                default=DEFAULT_CONNECT_TIMEOUT,
                metavar="S",
                help="ssh connect timeout in seconds (default %(default)g)",
            ),
            option(
                "--timeout",
                type=float,
                default=timeout_default,
                metavar="S",
                help="total time limit per target in seconds (default %(default)g)",
            ),
        )
    )


def target(timeout_default: float = DEFAULT_TIMEOUT) -> Group:
    """``--host/--container/--pod/--via`` (one at most), ``--connect-timeout`` and ``--timeout``:
    where the probe runs (default: this machine, in-process)."""
    where = one_of(
        option(
            "--host",
            metavar="[USER@]HOST[:PORT]",
            help="probe over ssh (your ~/.ssh/config, agent and known_hosts apply; BatchMode)",
        ),
        option(
            "--container", metavar="NAME", help="probe inside a container (docker/podman exec -i)"
        ),
        option(
            "--pod",
            metavar="[NS/]POD[:CONTAINER]",
            help="probe inside a Kubernetes pod (kubectl exec -i)",
        ),
        option(
            "--via",
            metavar="'CMD ...'",
            help="probe through any command prefix that starts a program there with stdin/stdout",
        ),
    )
    engine = hidden("--container-engine", choices=("docker", "podman"))
    title = "where to look (default: this machine)"
    return Group((where, engine, timeouts(timeout_default)), title=title)


TARGET = target()


def _size(text: str) -> int:
    """``4G``, ``512M``, ``64K`` or a number of bytes."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    number, unit = (text[:-1], text[-1].lower()) if text[-1:].isalpha() else (text, "")
    try:
        value = float(number) * units[unit] if unit else float(number)
    except (KeyError, ValueError):
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 4G, 512M)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 4G, 512M)")
    return int(value)


# Where requirements are resolved (pip's index options and settings), and for which interpreter
# and platform: scan and kernels (WHEEL and REQUIREMENT targets) and versions.
INDEXES = (
    option(
        "--index-url",
        metavar="URL",
        help="the main index (default: PIP_INDEX_URL, UV_INDEX_URL, pip's config, PyPI)",
    ),
    repeated(
        "--extra-index-url",
        "URL",
        "another index (with PIP_EXTRA_INDEX_URL and pip's config); repeatable",
    ),
    option(
        "--python-version",
        metavar="X.Y",
        help="choose wheels for this Python (default: this one)",
    ),
    option(
        "--max-download",
        type=_size,
        metavar="SIZE",
        help="the most one wheel downloaded whole may be, e.g. 8G (default 4G)",
    ),
    option(
        "--platform",
        metavar="TAG",
        help="choose wheels for this platform tag, e.g. manylinux_2_28_aarch64, and from a "
        "multi-platform image index the image of its architecture (images also take "
        "linux/arm64) (default: this machine's)",
    ),
)
# pip's --no-deps is archgap's default: only the wheels the requirements name are read.
DEPS = one_of(
    flag(
        "--deps",
        "also read the requirements' dependencies, resolved like pip install for the target "
        "(markers, extras; newest version that fits, no backtracking)",
    ),
    option(
        "--no-deps",
        dest="deps",
        action="store_false",
        help="only the wheels the requirements name (the default)",
    ),
)
RESOLVING = Group((*INDEXES, DEPS), title="resolving requirements (pip's index settings apply)")


def index_options(args: argparse.Namespace) -> IndexOptions:
    """The ``INDEXES``, ``DEPS``, ``REGISTRY`` and ``--timeout`` a command was given (those it
    does not take at their defaults)."""
    from archgap.index.options import IndexOptions

    return IndexOptions(
        args.index_url,
        tuple(args.extra_index_url),
        args.python_version,
        args.platform,
        getattr(args, "deps", False),
        getattr(args, "tls_verify", True),
        getattr(args, "timeout", None),
        args.max_download,
        getattr(args, "trust_token_realm", False),
    )
