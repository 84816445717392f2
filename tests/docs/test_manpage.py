"""The man page comes from the same parser as the CLI reference (scripts/manpage, through
argparse-manpage) and renders with man(1) without a troff warning: every command and every one of
its options is in it."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from archgap.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]


def test_the_man_page_names_every_command_and_option(tmp_path: Path) -> None:
    page = tmp_path / "archgap.1"
    subprocess.run([sys.executable, ROOT / "scripts/manpage", page], check=True, cwd=tmp_path)
    shown = subprocess.run(
        ["man", "-l", "-P", "cat", str(page)],
        env={"PATH": "/usr/bin:/bin", "MANWIDTH": "200", "LANG": "C.UTF-8"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stderr == ""  # a troff warning means text read as a request, and lost
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert len(subparsers.choices) >= 14
    for name, command in subparsers.choices.items():
        assert f"archgap {name}" in shown.stdout, name
        for action in command._actions:
            if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
                continue  # -h is not repeated per command; hidden options stay hidden
            for option in action.option_strings:
                assert option in shown.stdout, (name, option)
