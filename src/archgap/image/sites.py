"""Where an image keeps its Python environments: every ``lib/python3[.N]/site-packages`` or
``dist-packages`` directory, found in the image's merged file tree.

A site is reported under its real path (the directory the files are in). The walk finds the
real directories; sites reached only through links are found too, as a container sees them:
a ``site-packages`` that is itself a symlink (``/usr/local/lib/python3.11/site-packages ->
/opt/venv/lib/python3.11/site-packages``), or a venv's ``lib`` or ``lib/python3.X`` that is one.
Each link is resolved inside the image as the layer applier resolves a member's parent
directory (absolute links from the image's root, 40 hops at most); a loop is a problem naming
the link, a dangling link is nothing to report.
"""

from __future__ import annotations

import posixpath
import re

from archgap.image.facts import PythonSite
from archgap.image.layers import DIR, SYMLINK, FileTree, LinkError, NotInImage

# the names on the way to a site, one level each: lib or lib64, python3[.N] (its version, a
# group), site-packages or dist-packages
LIB, PYTHON, PACKAGES = r"lib(?:64)?", r"python(3(?:\.\d+)?)", r"(?:site|dist)-packages"
SITE = f"/{LIB}/{PYTHON}/{PACKAGES}"  # a site's path ends so
SITE_DIR = re.compile(SITE + "$")
LEVELS = tuple(re.compile(name + "$") for name in (LIB, PYTHON, PACKAGES))
# a link that stands for one of those levels (the rest of the way is under it)
LINK_LEVEL = (re.compile(f"/{LIB}$"), re.compile(f"/{LIB}/{PYTHON}$"), SITE_DIR)


def find_sites(tree: FileTree, problems: list[str] | None = None) -> tuple[PythonSite, ...]:
    """Every site-packages (or dist-packages) directory, outside other site-packages, under
    its real path; links that loop are added to ``problems``."""
    sites: list[PythonSite] = []
    links: list[str] = []
    for path, entry in tree.walk("/"):
        if entry.kind == SYMLINK and any(p.search(path) for p in LINK_LEVEL):
            links.append(path)
        elif entry.kind == DIR and SITE_DIR.search(path) and not _inside(path, sites):
            sites.append(_site(tree, path, path))
    for link in links:
        if _inside(link, sites):
            continue  # a link inside a site-packages is the package's own
        try:
            found = _through(tree, link)
        except NotInImage:
            continue
        except LinkError as exc:
            if problems is not None:
                problems.append(f"{link} (a link on the way to a Python site): {exc}")
            continue
        for seen, real in found:
            if not _inside(real + "/", sites):
                sites.append(_site(tree, seen, real))
    return tuple(sites)


def _inside(path: str, sites: list[PythonSite]) -> bool:
    return any(path.startswith(s.path + "/") for s in sites)


def _site(tree: FileTree, seen: str, real: str) -> PythonSite:
    """The site at ``real``, named as the path ``seen`` (where a venv's ``pyvenv.cfg`` or a
    conda environment's ``conda-meta`` is looked for, next to its ``lib``)."""
    match = SITE_DIR.search(seen)
    assert match is not None
    prefix = seen[: match.start()] or "/"
    kind = "system"
    if _exists(tree, posixpath.join(prefix, "pyvenv.cfg")):
        kind = "venv"
    elif _exists(tree, posixpath.join(prefix, "conda-meta")):
        kind = "conda"
    return PythonSite(real, match.group(1), kind)


def _exists(tree: FileTree, path: str) -> bool:
    try:
        tree.resolve(path)
    except LinkError:
        return False
    return True


def _through(tree: FileTree, link: str) -> list[tuple[str, str]]:
    """The sites under the symlink ``link`` (which stands for ``lib``, ``lib/python3.X`` or a
    site-packages): (the path as seen through the link, the real path) of each directory.
    ``LinkError``."""
    level = next(i for i, p in enumerate(LINK_LEVEL) if p.search(link))
    seen = [link]
    for pattern in LEVELS[level + 1 :]:
        seen = [
            f"{path}/{name}"
            for path in seen
            for name in _children(tree, path)
            if pattern.match(name)
        ]
    found = []
    for path in seen:
        real, entry = tree.resolve(path)
        if entry.kind == DIR:
            found.append((path, real))
    return found


def _children(tree: FileTree, path: str) -> list[str]:
    """The names in the directory ``path`` names (links followed); none for a file."""
    real, entry = tree.resolve(path)
    return tree.children(real) if entry.kind == DIR else []
