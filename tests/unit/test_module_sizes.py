"""One subject per module: no module of the package is over 600 lines (the project's rule,
CONTRIBUTING and docs/development.md); a module that grows past it is split along its seams."""

from __future__ import annotations

from pathlib import Path

import archgap

LIMIT = 600
PACKAGE = Path(archgap.__file__).resolve().parent


def test_no_module_is_over_600_lines() -> None:
    sizes = {
        str(path.relative_to(PACKAGE)): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
    }
    assert len(sizes) > 200  # the package itself, not an empty directory
    assert {name: n for name, n in sizes.items() if n > LIMIT} == {}
