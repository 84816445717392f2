"""What a library's absolute RUNPATH/RPATH directories hold on the target.

ld.so(8) looks a DT_NEEDED name up in the library's own RUNPATH (else RPATH) first, and dlopen
does the same for the library that calls it. ``$ORIGIN`` directories are the environment's own
files, which the analysis knows; an absolute one is wherever the library was built to look:
a system toolkit (``/usr/local/cuda-12.6/targets/x86_64-linux/lib``), or a path of the build
machine that the target may well not have (open3d 0.20.0's ``open3d_torch_ops.so`` names
``/root/.pyenv/versions/3.11/lib/python3.11/site-packages/torch/lib`` and ``/opt/open3d-cuda/lib``).
A directory that does not exist holds nothing: the loader goes on to the next. So the probe
looks each absolute directory up on the target and reports which of the library's names lie
there; without that, the analysis could not tell a missing library from one found there.
"""

from __future__ import annotations

import errno
import os
from dataclasses import replace
from typing import Callable, Dict, FrozenSet, Iterable, Iterator, List, Optional, Set

from .facts import TOOLKIT_DIRS, BinaryFacts

GONE = (errno.ENOENT, errno.ENOTDIR)  # the directory is not there: it holds nothing
MAX_DIRECTORY_NAMES = 100000  # names kept of one directory


class RunpathDirectories:
    """The file names of absolute directories of the target, each listed once."""

    def __init__(self, locate: Callable[[str], str]) -> None:
        self.locate = locate  # a path of the target -> where it is here (System.path)
        self.listed: Dict[str, Optional[FrozenSet[str]]] = {}

    def names(self, directory: str) -> Optional[FrozenSet[str]]:
        """The names in ``directory``; empty when it does not exist, None when it cannot be
        read (permissions): then what it holds is not known."""
        if directory not in self.listed:
            try:
                with os.scandir(self.locate(directory)) as entries:
                    found: Optional[FrozenSet[str]] = frozenset(
                        e.name for _, e in zip(range(MAX_DIRECTORY_NAMES), entries)
                    )
            except OSError as exc:
                found = frozenset() if exc.errno in GONE else None
            self.listed[directory] = found
        return self.listed[directory]

    def found(self, binary: BinaryFacts) -> Optional[List[str]]:
        """The names ``binary`` needs or dlopens that lie in its absolute RUNPATH/RPATH
        directories, sorted; None when it has no such directory or one could not be read."""
        absolute = [
            d.rstrip("/") or "/"
            for d in binary.runpath
            if d.startswith("/") and not d.startswith(TOOLKIT_DIRS)  # the loader section's
        ]
        if not absolute or binary.needed is None:
            return None
        wanted = set(binary.needed) | set(binary.dlopens or ())
        there: Set[str] = set()
        for directory in absolute:
            names = self.names(directory)
            if names is None:
                return None
            there |= wanted & names
        return sorted(there)


def with_runpaths(
    locate: Callable[[str], str], found: Iterable[BinaryFacts]
) -> Iterator[BinaryFacts]:
    """``found``, each ELF library with ``runpath_found`` told (``locate``: System.path)."""
    directories = RunpathDirectories(locate)
    for binary in found:
        names = directories.found(binary)
        yield binary if names is None else replace(binary, runpath_found=tuple(names))
