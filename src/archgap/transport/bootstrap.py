"""The probe as a program sent on stdin: loaded from memory on the target, nothing written there.

The remote command is always ``PYTHON -I -S -``: the interpreter reads one program from stdin.
It refuses a Python older than 3.8 with a marker line, then compiles the bootstrap, which takes
the JSON embedded in the same program (the probe's module sources and the request), installs the
modules as an in-memory package through an import hook, runs the probe's ``run``
and prints the facts after a marker line. ``-I -S`` keep the target environment's ``.pth`` files,
sitecustomize and user site out; no ``.pyc`` is written because no module comes from a file.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

PACKAGE = "archgap_probe"  # the probe's package name on the target (no clash with an install)
FACTS_MARKER = "@@ARCHGAP-FACTS@@"
TOO_OLD_MARKER = "@@ARCHGAP-TOO-OLD@@"
TOO_OLD_STATUS = 3

# The whole program arrives on stdin (``PYTHON -I -S -``): the remote command is four plain
# words, so it means the same whether or not a shell runs it. Its first lines parse on any
# Python 3 (and 2) so that an old interpreter says "too old"; the bootstrap and the request are
# ASCII string literals, compiled only past that check.
PROGRAM_HEAD = (
    "import sys\n"
    "if sys.version_info < (3, 8):\n"
    f'    sys.stdout.write("{TOO_OLD_MARKER} %s\\n" % sys.version.split()[0])\n'
    f"    sys.exit({TOO_OLD_STATUS})\n"
)
# Characters that mean the same to a POSIX shell as to an argument vector (no quoting, globbing,
# expansion or assignment): every word of the remote command is made of these.
SHELL_NEUTRAL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./+:@%,-")

# Installs the modules in ``_sources`` as the in-memory package ``_package``: shared by the stdin
# bootstrap and the standalone script. Runs on the target: Python 3.8 syntax, standard library.
_MEMORY_PACKAGE = """
_packages = set(name.rpartition(".")[0] for name in _sources)  # every parent of a module


class _MemoryLoader(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _sources:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=fullname in _packages)

    def create_module(self, spec):
        return None

    def get_source(self, fullname):
        return _sources.get(fullname)

    def exec_module(self, module):
        if module.__name__ in _packages:
            module.__path__ = []
        code = compile(_sources[module.__name__], "<archgap>/" + module.__name__, "exec")
        exec(code, module.__dict__)


sys.meta_path.insert(0, _MemoryLoader())
"""

BOOTSTRAP = (
    """
import importlib, importlib.abc, importlib.util, json, sys
sys.dont_write_bytecode = True
_payload = json.loads(_payload_text)
_package = _payload["package"]
_sources = dict((_package + ("." + k if k else ""), v) for k, v in _payload["modules"].items())
"""
    + _MEMORY_PACKAGE
    + """
_facts = importlib.import_module(_package + ".__main__").run(_payload["input"])
sys.stdout.write("\\n%s %s\\n" % (_payload["marker"], json.dumps(_facts)))
sys.stdout.flush()
"""
)

# The standalone script (``archgap probe --script``) for engines that copy a file and run it.
STANDALONE = (
    '''#!/usr/bin/env python3
"""archgap probe, standalone: prints this machine's facts as one JSON line (stdlib only).

Usage: python3 archgap-probe.py [REQUEST_JSON]   (no file is written; Python >= 3.8)

Without an argument it collects what `archgap probe --script` was asked for when this file was
written; REQUEST_JSON replaces that request. The output is what `archgap fleet --from` reads.
"""
import importlib, importlib.abc, importlib.util, json, sys
sys.dont_write_bytecode = True
_package = "{package}"
_modules = {modules}
_input = {input}
if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
    sys.stdout.write(__doc__.lstrip())
    sys.exit(0)
if len(sys.argv) > 1:
    try:
        _input = json.loads(sys.argv[1])
    except ValueError as exc:
        sys.stderr.write("archgap-probe: REQUEST_JSON is not JSON (%s); see --help\\n" % exc)
        sys.exit(2)
_sources = dict((_package + ("." + k if k else ""), v) for k, v in _modules.items())
'''
    + _MEMORY_PACKAGE
    + """
json.dump(importlib.import_module(_package + ".__main__").run(_input), sys.stdout)
sys.stdout.write("\\n")
"""
)


@cache
def probe_sources() -> dict[str, str]:
    """Every module of ``archgap.probe`` and its subpackages, by dotted name relative to it: ''
    for the package itself, ``source`` for the subpackage's ``__init__``, ``source.trace``; as
    shipped (``transport.shipped``: docstrings and comments blanked, lines kept). Read once."""
    from importlib import resources  # not at import: every command imports this module

    from archgap.transport.shipped import shipped

    sources: dict[str, str] = {}
    folders = [(resources.files("archgap.probe"), "")]
    while folders:
        folder, prefix = folders.pop()
        for entry in folder.iterdir():
            name = entry.name
            if name.endswith(".py") and entry.is_file():
                key = prefix[:-1] if name == "__init__.py" else prefix + name[:-3]
                sources[key] = shipped(entry.read_text(encoding="utf-8"))
            elif name.isidentifier() and entry.joinpath("__init__.py").is_file():
                folders.append((entry, prefix + name + "."))
    return dict(sorted(sources.items()))


def probe_input(
    request: dict[str, Any],
    root: str = "/",
    env_from: str | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """What the probe reads: the request, the root prefix, ``--env-from`` and the most seconds
    any command on the target may take (``--timeout``)."""
    probe_in: dict[str, Any] = {"request": request, "root": root, "env_from": env_from}
    if timeout is not None:
        probe_in["timeout"] = timeout
    return probe_in


def stdin_payload(probe_in: dict[str, Any]) -> bytes:
    """The program the transport writes to ``PYTHON -I -S -``: the version check, then the
    bootstrap and the JSON (probe modules and request) as string literals."""
    body = json.dumps(
        {
            "package": PACKAGE,
            "modules": probe_sources(),
            "input": probe_in,
            "marker": FACTS_MARKER,
        }
    )
    program = (
        PROGRAM_HEAD
        + f"_payload_text = {body!a}\n"
        + f'exec(compile({BOOTSTRAP!a}, "<archgap-bootstrap>", "exec"))\n'
    )
    return program.encode("ascii")


def remote_argv(python: str) -> list[str]:
    """The remote command: the interpreter reads its program from stdin."""
    return [python, "-I", "-S", "-"]


def shell_neutral(word: str) -> bool:
    """Whether ``word`` reads the same with and without a shell in between."""
    return bool(word) and all(c in SHELL_NEUTRAL for c in word)


def standalone_script(probe_in: dict[str, Any]) -> str:
    """A self-contained Python file printing the facts (for Ansible, pdsh, a Kubernetes Job)."""
    return STANDALONE.format(package=PACKAGE, modules=repr(probe_sources()), input=repr(probe_in))


def find_facts(stdout: str) -> dict[str, Any] | None:
    """The facts after the last marker line (login scripts may print before it), or None."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(FACTS_MARKER + " "):
            try:
                facts = json.loads(line[len(FACTS_MARKER) + 1 :])
            except ValueError:
                return None
            return facts if isinstance(facts, dict) else None
    return None


def find_too_old(stdout: str) -> str | None:
    """The version a too-old interpreter reported, or None."""
    for line in stdout.splitlines():
        if line.startswith(TOO_OLD_MARKER):
            return line[len(TOO_OLD_MARKER) :].strip() or "unknown"
    return None
