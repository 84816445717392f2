"""Text in a pipe: ``report.console.plain_text`` prints what rich prints there (no styles), without
loading rich. rich itself is the reference: every case is printed by a rich Console as the CLI
makes it off a terminal (no highlighting, soft wrap) and must come out byte for byte the same."""

from __future__ import annotations

import io
import random

from rich.console import Console
from rich.markup import escape

from archgap.report.console import plain_text

PIECES = ("[", "]", "\\", "a", "/", " ", "[bold]", "[/]", "[dim]", "[/dim]", "x y", "é", "=",
          "#", "@", ":", "\n", "0", "[1]", "[a b]", "[link=x]", "sm_90a", "—", "←")  # fmt: skip
CASES = (
    "",
    "[bold]GPUs[/] none found",
    "  [dim]/opt/lib\\[x]/libcuda.so ← kb/gpus.json[/]",
    "trailing backslash \\",
    "\\\\[bold]not a tag[/]",
    "[bold red]2 gap(s)[/] on a present or named GPU",
    "  nvcc 13.0.88 [dim]/usr/local/cuda/bin/nvcc (PATH)[/]",
)


def rich_prints(markup: str) -> str:
    out = io.StringIO()
    Console(file=out, highlight=False, soft_wrap=True, force_terminal=False).print(markup)
    return out.getvalue()


def test_plain_text_is_what_rich_prints_off_a_terminal() -> None:
    generator = random.Random(11)
    raws = [*CASES]
    for _ in range(3000):
        raws.append("".join(generator.choice(PIECES) for _ in range(generator.randint(0, 9))))
    checked = 0
    for raw in raws:
        for markup in (raw, escape(raw), f"[bold]{escape(raw)}[/]", f"[dim]{escape(raw)}[/]"):
            try:
                expected = rich_prints(markup)
            except Exception:  # markup rich refuses: the CLI never writes it
                continue
            plain = plain_text(markup)
            if plain is not None:
                checked += 1
                assert plain + "\n" == expected, markup
    assert checked > 10_000


def test_emoji_codes_and_tabs_are_left_to_rich() -> None:
    # rich turns ":thumbs_up:" into an emoji and tabs into spaces: those lines go through it.
    assert rich_prints("ok :thumbs_up:") != "ok :thumbs_up:\n"
    assert plain_text("ok :thumbs_up:") is None
    assert plain_text("a\tb") is None
    assert plain_text("sm_90a: ok") == "sm_90a: ok"
