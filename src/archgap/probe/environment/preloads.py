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

import os
import re
from typing import Iterable, List, Sequence, Tuple

from .system import read_regular

MAX_SOURCE_BYTES = 1 << 20  # bytes of one __init__.py read at most
MAX_PACKAGES = 16  # top-level packages read per distribution at most
MAX_NAMES = 64  # names kept per distribution
LOADS = re.compile(r"\b(?:CDLL|LoadLibrary)\b")
# a string constant that names a shared library, or a glob of one: "libcudart.so.*[0-9]"
LIBRARY = re.compile(r"""["'](lib[A-Za-z0-9_+.\-]*\.so[A-Za-z0-9_.*?\[\]\-]*)["']""")


def package_inits(names: Iterable[str]) -> List[str]:
    """The ``PACKAGE/__init__.py`` files among a RECORD's names, in its order."""
    found = []
    for name in names:
        parts = name.split("/")
        if len(parts) == 2 and parts[1] == "__init__.py" and parts[0].isidentifier():
            found.append(name)
    return found


def preloaded(site: str, inits: Sequence[str]) -> Tuple[str, ...]:
    """The library names and patterns the ``inits`` (``package_inits``, under ``site``) load
    through ctypes, sorted (see the module doc)."""
    names: List[str] = []
    for init in inits[:MAX_PACKAGES]:
        try:
            data, _ = read_regular(os.path.join(site, init), MAX_SOURCE_BYTES, follow=False)
        except OSError:
            continue
        text = data.decode("utf-8", "replace")
        if LOADS.search(text):
            names += LIBRARY.findall(text)
    return tuple(sorted(set(names)))[:MAX_NAMES]
