"""A newcomer, from the README alone: a fresh virtual environment, the Install section's command as
written, run in a copy of the checkout's tracked files, then the Quick start session as written,
with the archgap that install put on PATH (never this checkout's editable one).

The commands are read from README.md each run, so a README whose commands stop working fails here.
What the Quick start names (``venv`` with FlashInfer 0.6.8 from PyPI, a CUDA 12.8 ``cuda-12.8``) is
the examples' sandbox (tests/docs/examples.py), as the user's own would be.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from tests.docs.examples import Sandbox, matches, steps
from tests.helpers import ROOT
from tests.integration.freshinstall import Shell, Venv, pipx_shell, tracked_copy

README = ROOT / "README.md"
VENV_HINT = "in a virtual environment:"


def section(heading: str) -> list[tuple[str, str]]:
    """The fenced blocks (language, text) of the README's ``## heading`` section, in order."""
    tokens = MarkdownIt().parse(README.read_text(encoding="utf-8"))
    blocks: list[tuple[str, str]] = []
    inside = False
    for at, token in enumerate(tokens):
        if token.type == "heading_open" and token.tag == "h2":
            inside = tokens[at + 1].content.strip() == heading
        elif inside and token.type == "fence":
            blocks.append((token.info.strip(), token.content))
    if not blocks:
        raise AssertionError(f"README.md has no code block under '## {heading}'")
    return blocks


def install_commands() -> dict[str, str]:
    """The Install section's first line, ``pipx install .  # or, in a virtual environment: pip
    install .``, as its two commands: with pipx, and in a virtual environment."""
    language, text = section("Install")[0]
    assert language == "sh", language
    first = text.splitlines()[0]
    command, _, comment = first.partition("#")
    assert VENV_HINT in comment, f"the README no longer says what to run in a venv: {first!r}"
    return {"pipx": command.strip(), "venv": comment.split(VENV_HINT, 1)[1].strip()}


def exit_code_meanings() -> dict[int, str]:
    """The README's exit-code table: code -> meaning."""
    table: dict[int, str] = {}
    text = README.read_text(encoding="utf-8").split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    for row in re.finditer(r"^\| (\d) \| (.+) \|$", text, re.M):
        table[int(row[1])] = row[2]
    return table


class NewcomerSandbox(Sandbox):
    """The examples' sandbox, run in the newcomer's shell: its archgap on PATH, not this one's."""

    def __init__(self, root: Path, shell: Shell) -> None:
        super().__init__(root)
        self.shell = shell

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in super().environment().items() if not k.startswith("COVERAGE")}
        return {**env, "PATH": self.shell.environment()["PATH"], **self.shell.extra}


@dataclass(frozen=True)
class Newcomer:
    checkout: Path
    shell: Shell
    command: str
    install_output: str
    install_status: int


@pytest.fixture(scope="module", params=["venv", "pipx"])
def newcomer(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Newcomer]:
    """The README's install, each way it gives, in a copy of the tracked files."""
    home = tmp_path_factory.mktemp(f"newcomer-{request.param}")
    checkout = tracked_copy(home / "archgap")
    shell = Venv(home / "venv") if request.param == "venv" else pipx_shell(home)
    command = install_commands()[request.param]
    done = shell.shell(command, cwd=checkout)
    yield Newcomer(checkout, shell, command, done.stdout, done.returncode)


def test_the_install_command_installs_archgap(newcomer: Newcomer) -> None:
    assert newcomer.command in {"pip install .", "pipx install ."}, newcomer.command
    assert newcomer.install_status == 0, newcomer.install_output[-4000:]
    found = newcomer.shell.shell("command -v archgap", cwd=newcomer.checkout)
    assert found.stdout.strip() == str(newcomer.shell.bin / "archgap"), found.stdout
    # A real install (a built wheel unpacked into its own environment, no system site packages),
    # not a link back to the checkout, and not the environment the tests run in.
    python = Path(found.stdout.strip()).resolve().parent / "python"
    where = newcomer.shell.shell(
        f"'{python}' -c 'import archgap, sys; print(archgap.__file__, sys.prefix)'",
        cwd=newcomer.checkout,
    )
    module, prefix = where.stdout.split()
    assert Path(module).is_relative_to(Path(prefix) / "lib"), module
    assert Path(prefix) != Path(sys.prefix) and not Path(prefix).is_relative_to(newcomer.checkout)
    config = (Path(prefix) / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in config, config


def test_the_quick_start_prints_what_the_readme_shows(
    newcomer: Newcomer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    assert newcomer.install_status == 0, newcomer.install_output[-4000:]
    blocks = section("Quick start")
    sessions = [text for language, text in blocks if language == "console"]
    assert sessions, f"no console session under '## Quick start': {[b[0] for b in blocks]}"
    sandbox = NewcomerSandbox(tmp_path_factory.mktemp("quickstart"), newcomer.shell)
    meanings = exit_code_meanings()
    for session in sessions:
        for step in steps(session):
            assert "archgap " in step.command, step
            actual = sandbox.run(step)
            expected = sandbox.normalise("\n".join(step.expected))
            assert matches(expected, actual), (
                f"$ {step.command}\nexpected:\n"
                + "\n".join(expected)
                + "\ngot:\n"
                + "\n".join(actual)
            )
            # The story (FlashInfer 0.6.8, nvcc 12.8, compute capability 12.0) is a gap: exit 1,
            # which the README's exit-code table gives as "a gap ... a JIT build fails".
            status = [line for line in actual if re.fullmatch(r"exit \d+", line)]
            assert status == ["exit 1"], actual[-3:]
            assert meanings[1].startswith("a gap") and "JIT build fails" in meanings[1]
            assert any(
                line.startswith("  fails flashinfer-python 0.6.8 on RTX PRO 6000 (12.0)")
                for line in actual
            ), actual
            assert any(line.startswith("1 gap(s) on a present or named GPU") for line in actual)
