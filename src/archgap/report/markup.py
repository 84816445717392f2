"""Values interpolated into the rich-markup lines the text renderers return: shown literally
(a "[" cannot open a tag) and on one line (control and bidi characters made visible)."""

from __future__ import annotations

from archgap.report.visible import literal


def escape(text: str) -> str:
    """``text`` as a literal value in a markup line (what the CLI's plain-text output undoes)."""
    return literal(text).replace("[", "\\[")


def short_path(path: str, module: str) -> str:
    """The path from site-packages (or else from the import root): flashinfer/jit/core.py."""
    import os

    from archgap.analysis.trees import relative_path

    relative = relative_path(path)
    if relative != path:
        return relative
    if not module:
        return path
    depth = len(module.split(".")) + (1 if path.endswith("__init__.py") else 0)
    return "/".join(path.split(os.sep)[-depth:])
