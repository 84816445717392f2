"""The libraries a package's own import loads by path first, read from its source as text (never
imported).

ld.so(8) does not search site-packages, so a package whose extension needs a CUDA library from
an nvidia-* wheel, with no RUNPATH to it, loads that library itself before the extension: once
loaded, it satisfies the extension's DT_NEEDED by its soname. pycolmap-cuda12 4.2.1's
``pycolmap/__init__.py`` globs ``libcudart.so.*[0-9]`` in ``nvidia.cuda_runtime`` and
``libcurand.so.*[0-9]`` in ``nvidia.curand`` and passes each to ``ctypes.CDLL`` before
``from . import _core``; torch's ``_preload_cuda_deps`` does the same for its nvidia-* libraries.

What is read: the ``__init__.py`` of each top-level package the distribution installs (the code
that runs at import), and only where it calls ``CDLL``/``LoadLibrary``: the library names and
name patterns its string constants hold (``"libcudart.so.*[0-9]"``). A name written any other
way (computed at run time) is not read, and the analysis then finds nothing preloaded.
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import replace
from typing import List, Sequence, Tuple

from ..facts import Distribution
from .system import read_regular

MAX_RECORD_BYTES = 16 << 20
MAX_SOURCE_BYTES = 1 << 20  # bytes of one __init__.py read at most
MAX_PACKAGES = 16  # top-level packages read per distribution at most
MAX_NAMES = 64  # names kept per distribution
LOADS = re.compile(r"\b(?:CDLL|LoadLibrary)\b")
# a string constant that names a shared library, or a glob of one: "libcudart.so.*[0-9]"
LIBRARY = re.compile(r"""["'](lib[A-Za-z0-9_+.\-]*\.so[A-Za-z0-9_.*?\[\]\-]*)["']""")


def with_preloads(dists: Sequence[Distribution]) -> Tuple[Distribution, ...]:
    """``dists``, each distribution with native files given what its import preloads."""
    return tuple(
        replace(d, preloads=preloaded(d.dist_info)) if d.native_files else d for d in dists
    )


def preloaded(dist_info: str) -> Tuple[str, ...]:
    """The library names and patterns the distribution's top-level ``__init__.py`` files
    load through ctypes, sorted (see the module doc)."""
    site = os.path.dirname(dist_info)
    names: List[str] = []
    for init in _package_inits(dist_info)[:MAX_PACKAGES]:
        try:
            data, _ = read_regular(os.path.join(site, init), MAX_SOURCE_BYTES, follow=False)
        except OSError:
            continue
        text = data.decode("utf-8", "replace")
        if LOADS.search(text):
            names += LIBRARY.findall(text)
    return tuple(sorted(set(names)))[:MAX_NAMES]


def _package_inits(dist_info: str) -> List[str]:
    """The ``PACKAGE/__init__.py`` files the distribution's RECORD lists, in its order."""
    try:
        data, _ = read_regular(os.path.join(dist_info, "RECORD"), MAX_RECORD_BYTES)
    except OSError:
        return []
    found = []
    for line in data.decode("utf-8", "replace").splitlines():
        if "__init__.py" not in line:
            continue
        try:
            row = next(csv.reader([line]), [])
        except csv.Error:  # a row no reader takes (a huge field): that row only
            continue
        parts = (row[0] if row else "").split("/")
        if len(parts) == 2 and parts[1] == "__init__.py" and parts[0].isidentifier():
            found.append("/".join(parts))
    return found
