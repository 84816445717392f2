"""Which source files belong to trees that never run as part of a package: vendored copies of
other projects, examples, tests. `gates` and `trace` leave them out by default (with a count)."""

from __future__ import annotations

import os

from archgap.probe.source.files import SITE_DIRS

# Directory names (any level below the package root) and what they hold.
TREES = {
    "vendored": ("_vendor", "vendor", "vendored", "third_party", "thirdparty", "3rdparty", "data"),
    "example": ("examples", "example", "samples", "tutorials", "benchmarks", "benchmark", "docs"),
    "test": ("tests", "test", "testing", "unittests"),
}
_BY_NAME = {name: kind for kind, names in TREES.items() for name in names}


def relative_path(path: str, root: str = "") -> str:
    """The path from site-packages when it is under one, else from ``root`` when under it."""
    parts = path.split(os.sep)
    for index in range(len(parts) - 2, 0, -1):
        if parts[index] in SITE_DIRS:
            return "/".join(parts[index + 1 :])
    if root and path.startswith(root.rstrip(os.sep) + os.sep):
        return path[len(root.rstrip(os.sep)) + 1 :].replace(os.sep, "/")
    return path


def aside(relative: str) -> tuple[str, str] | None:
    """(kind, the tree's path) when a file (a path relative to site-packages or to the scanned
    root) lies in a vendored, example or test tree, or is a test module itself."""
    parts = relative.split("/")
    for index, name in enumerate(parts[:-1]):
        kind = _BY_NAME.get(name.lower())
        if kind is not None:
            return kind, "/".join(parts[: index + 1])
    filename = parts[-1]
    if filename.startswith("test_") or filename.endswith("_test.py") or filename == "conftest.py":
        return "test", relative
    return None


def ranked(counts: dict[tuple[str, str], int]) -> tuple[tuple[str, str, int], ...]:
    """(kind, tree, count) rows, the tree with most left out first."""
    return tuple(
        (kind, path, n) for (kind, path), n in sorted(counts.items(), key=lambda kv: -kv[1])
    )


def left_out_sentence(count: int, what: str, trees: tuple[tuple[str, str, int], ...]) -> str:
    """'209 gates in 124 functions of vendored, example and test trees left out: flashinfer/data
    (vendored, 209); --all shows them' ("" when nothing was left out). ``what`` names the count."""
    if not count:
        return ""
    shown = ", ".join(f"{path} ({kind}, {n})" for kind, path, n in trees[:5])
    more = f" and {len(trees) - 5} more" if len(trees) > 5 else ""
    return (
        f"{count} {what} of vendored, example and test trees left out: {shown}{more}; "
        "--all shows them"
    )
