"""Agreement with the real cuobjdump (PyPI nvidia-cuda-cuobjdump, installed by scripts/testdata).

For every fixture, the default listing must name exactly what `cuobjdump --list-elf` and
`--list-ptx` print, in the same order. cuobjdump's names: `sm_XY` plus `a` for SASS (the family
`f` dropped), `sm_XY` plus `a`/`f` for PTX.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from archgap.probe.binary.fatbin import read_binary
from archgap.probe.facts import BinaryFacts

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "tests" / "fixtures" / "cuda" / "bin"
CUOBJDUMP = next(
    iter(
        (ROOT / "tests" / ".data" / "venv-cuobjdump").glob(
            "lib/python*/site-packages/nvidia/*/bin/cuobjdump"
        )
    ),
    None,
)
LINE = re.compile(r"^(ELF|PTX) file\s+\d+: .*\.(sm_\d+[af]?)\.(cubin|ptx)$")

pytestmark = pytest.mark.skipif(CUOBJDUMP is None, reason="scripts/testdata installs cuobjdump")


def cuobjdump_names(path: Path, option: str) -> list[str]:
    assert CUOBJDUMP is not None
    proc = subprocess.run(
        [str(CUOBJDUMP), option, str(path)], capture_output=True, text=True, timeout=60
    )
    return [m.group(2) for m in map(LINE.match, proc.stdout.splitlines()) if m]


def our_names(facts: BinaryFacts, kind: str) -> list[str]:
    names = []
    for e in facts.entries:
        if e.listed and e.kind == kind:
            variant = e.variant if kind == "ptx" or e.variant == "a" else ""
            names.append(f"sm_{e.arch}{variant}")
    return names


@pytest.mark.parametrize("name", sorted(p.name for p in BIN.iterdir()))
def test_default_listing_matches_cuobjdump(name: str) -> None:
    path = BIN / name
    facts = read_binary(str(path))
    assert our_names(facts, "sass") == cuobjdump_names(path, "--list-elf")
    assert our_names(facts, "ptx") == cuobjdump_names(path, "--list-ptx")
