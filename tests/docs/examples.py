"""The shell examples of the README and docs/, run as written (Sybil parses the Markdown).

A ```console block is a session: each ``$ `` line (with ``\\`` continuations) is run by bash in the
examples' sandbox, and the lines up to the next ``$ `` are its expected output. Both sides are
normalised the same way (the sandbox's path shown as /srv/demo, this host's name, durations,
fleet fingerprints), and
a line ``...`` matches any number of lines (an example still shows at least one line of output).
```sh / ```bash blocks are commands to copy, not sessions.

The sandbox is what the examples name: ``venv`` (FlashInfer 0.6.8 as installed from PyPI),
``cuda-12.8`` (a CUDA 12.8 nvcc banner), ``crash.log`` (the seed incident's server log) and
``wheels/`` (wheels downloaded from PyPI), ``libs/`` (binaries built by the project's .cu sources),
with archgap on PATH.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from sybil import Example, Sybil
from sybil.parsers.markdown import CodeBlockParser

from tests.helpers import DATA, FIXTURES
from tests.toolkit_stubs import banner_toolkit

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# Where the pages say the examples ran: the sandbox and archgap's checkout, wherever they are.
SHOWN_SANDBOX, SHOWN_CHECKOUT = "/srv/demo", "/opt/archgap"
DURATION = re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s)\b")
FINGERPRINT = re.compile(r"\bfingerprint [0-9a-f]{10}\b")  # a hash of facts that name the sandbox


@dataclass(frozen=True)
class Step:
    command: str
    expected: list[str]


def steps(block: str) -> list[Step]:
    """The commands of a console block, each with the output lines written after it."""
    found: list[Step] = []
    lines = block.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.startswith("$ "):
            raise ValueError(f"a console block's first line is a `$ ` command, not {line!r}")
        command = [line[2:]]
        while command[-1].endswith("\\") and index + 1 < len(lines):
            index += 1
            command.append(lines[index])
        index += 1
        expected: list[str] = []
        while index < len(lines) and not lines[index].startswith("$ "):
            expected.append(lines[index])
            index += 1
        found.append(Step("\n".join(command), expected))
    return found


def matches(expected: list[str], actual: list[str]) -> bool:
    """Line by line, where a line ``...`` stands for any number of lines."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(matches(expected[1:], actual[at:]) for at in range(len(actual) + 1))
    return bool(actual) and expected[0] == actual[0] and matches(expected[1:], actual[1:])


class Sandbox:
    """The directory examples run in, made once per test session."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        links = {
            "venv": DATA / "venv-flashinfer-python-0.6.8",
            "wheels": DATA / "wheels",
            "libs": FIXTURES / "cuda" / "bin",
            "crash.log": FIXTURES / "explain_corpus" / "sglang-incident-flashinfer-0.6.8.log",
        }
        for name, target in links.items():
            if not target.exists():
                raise FileNotFoundError(f"{target}: scripts/testdata has not run")
            if not (root / name).exists():
                (root / name).symlink_to(target)
        if not (root / "cuda-12.8").exists():
            banner_toolkit(root / ".toolkits", "12.8").rename(root / "cuda-12.8")
        (root / "home").mkdir(exist_ok=True)

    def environment(self) -> dict[str, str]:
        bin_dir = str(Path(sys.executable).parent)
        return {
            "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.root / "home"),
            "LANG": "C.UTF-8",
            "COLUMNS": "100",
            "TERM": "dumb",
            "PYTHONDONTWRITEBYTECODE": "1",
            **{k: v for k, v in os.environ.items() if k.startswith("COVERAGE")},
        }

    def normalise(self, text: str) -> list[str]:
        for path, shown in ((self.root, SHOWN_SANDBOX), (ROOT, SHOWN_CHECKOUT)):
            text = text.replace(str(path), shown)
        text = re.sub(rf"\b{re.escape(os.uname().nodename)}\b", "gpu-node", text)
        text = DURATION.sub("<t>", text)
        text = FINGERPRINT.sub("fingerprint <hash>", text)
        lines = [line.rstrip() for line in text.splitlines()]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    def run(self, step: Step) -> list[str]:
        result = subprocess.run(
            ["bash", "-c", step.command],
            cwd=self.root,
            env=self.environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=120,
        )
        return self.normalise(result.stdout)


def evaluate(example: Example) -> str | None:
    """Sybil's evaluator: the sandbox is in the document's namespace (put there by the test)."""
    sandbox: Sandbox = example.namespace["sandbox"]
    for step in steps(str(example.parsed)):
        actual = sandbox.run(step)
        expected = sandbox.normalise("\n".join(step.expected))
        if expected == ["..."]:
            return f"$ {step.command}: an example shows at least one line of its output"
        if not matches(expected, actual):
            shown = "\n".join(actual)
            return f"$ {step.command}\nexpected:\n" + "\n".join(expected) + f"\ngot:\n{shown}"
    return None


PARSER = Sybil(parsers=[CodeBlockParser(language="console", evaluator=evaluate)])


def document_examples() -> list[tuple[str, Example]]:
    """Every console example of the README and docs/, named by file and line."""
    return [
        (f"{path.relative_to(ROOT)}:{example.line}", example)
        for path in DOCUMENTS
        for example in PARSER.parse(path)
    ]
