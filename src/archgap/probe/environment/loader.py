"""Probe section "loader": the libraries the target's dynamic loader finds by name alone.

Besides a library's own RUNPATH/RPATH and LD_LIBRARY_PATH, ld.so(8) looks a bare name up in
its cache of the ld.so.conf directories (/etc/ld.so.cache, written by ldconfig), then in the
trusted directories. The cache names every library it can give (NUL-terminated paths); the
analysis resolves a DT_NEEDED name no installed package ships against these names. Libraries
built against a system toolkit name its directory in their RUNPATH
(/usr/local/cuda-12.8/targets/x86_64-linux/lib, as bitsandbytes' builds): the toolkits'
library directories under /usr/local are listed each on its own.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Set

from .gpu import LOADER_CACHE, LOADER_DEFAULT_DIRS, MAX_LOADER_CACHE_BYTES
from .system import System, read_regular

MAX_NAMES = 100000
TOOLKITS = "/usr/local"  # where the CUDA toolkit installers put cuda-X.Y (and the cuda link)
# a path in the cache: "/usr/lib/x86_64-linux-gnu/libcublas.so.12" followed by its NUL
CACHED_PATH = re.compile(rb"/[^\0]*/(lib[^/\0]*\.so[^/\0]*)\0")


def collect_loader(system: System, params: Any) -> Dict[str, Any]:
    """{"names": [...], "directories": [...], "error": str or None}: the library names in the
    loader's cache and in the directories it always searches and LD_LIBRARY_PATH names."""
    names: Set[str] = set()
    error = None
    try:
        cache, cut = read_regular(system.path(LOADER_CACHE), MAX_LOADER_CACHE_BYTES)
        names.update(m.decode("utf-8", "replace") for m in CACHED_PATH.findall(cache))
        if cut:
            error = "%s is larger than %d bytes: the rest is not read" % (
                LOADER_CACHE,
                MAX_LOADER_CACHE_BYTES,
            )
    except OSError as exc:  # no cache (musl), unreadable: only the directories below
        error = "%s: %s" % (LOADER_CACHE, exc.strerror or exc)
    library_path = system.getenv("LD_LIBRARY_PATH") or ""
    directories: List[str] = [d for d in library_path.split(":") if d.startswith("/")]
    directories += list(LOADER_DEFAULT_DIRS)
    for directory in directories:
        try:
            with os.scandir(system.path(directory)) as found:
                names.update(e.name for e in found if ".so" in e.name)
        except OSError:
            continue
    return {
        "names": sorted(names)[:MAX_NAMES],
        "directories": [LOADER_CACHE, *directories],
        "error": error,
        "toolkit_dirs": _toolkit_dirs(system),
    }


def _toolkit_dirs(system: System) -> List[List[Any]]:
    """[directory, [library names]] of each CUDA toolkit's library directories in /usr/local."""
    found: List[List[Any]] = []
    try:
        homes = sorted(n for n in os.listdir(system.path(TOOLKITS)) if n.startswith("cuda"))
    except OSError:
        return found
    for home in homes:
        root = "%s/%s" % (TOOLKITS, home)
        candidates = [root + "/lib64"]
        try:
            targets = sorted(os.listdir(system.path(root + "/targets")))
        except OSError:
            targets = []
        candidates += ["%s/targets/%s/lib" % (root, t) for t in targets]
        for directory in candidates:
            try:
                with os.scandir(system.path(directory)) as listed:
                    found.append([directory, sorted(e.name for e in listed if ".so" in e.name)])
            except OSError:
                continue
    return found
