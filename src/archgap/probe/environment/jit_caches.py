"""JIT caches of the environment's user: what FlashInfer, torch extensions and Triton built before.

Where each package puts them (read from their installed source):
- FlashInfer (jit/env.py, 0.5+): ``$FLASHINFER_WORKSPACE_BASE`` or ``$HOME``, then
  ``.cache/flashinfer/<version>/<archs>/cached_ops/<name>/<name>.so`` with its ``build.ninja``
  (``cuda_home = ...``, ``cuda_cflags = ... -gencode=...``); ``<archs>`` joins TARGET_CUDA_ARCHS.
- torch C++ extensions (utils/cpp_extension.py ``_get_build_directory``):
  ``$TORCH_EXTENSIONS_DIR/<name>/`` when set, else ``$XDG_CACHE_HOME`` (or ``~/.cache``)
  ``/torch_extensions/<py>_<cu>/<name>/``.
- CuPy (cuda/compiler.py): ``$CUPY_CACHE_DIR`` or ``~/.cupy/kernel_cache``, one ``<md5>_2.cubin``
  per kernel: the md5 of the cubin (32 hex digits) followed by the cubin.
- Triton (knobs.py ``cache_knobs``): ``$TRITON_CACHE_DIR``, else ``$TRITON_HOME`` (or ``~``)
  ``/.triton/cache/<hash>/<kernel>.cubin`` beside ``<kernel>.json`` (``target.arch``,
  ``triton_version``, ``ptx_version``).

The architecture of an entry is read from its binary (fatbin.read_binary), never from a directory
name. Nothing is written or deleted. Standard library only (Python 3.8): this travels to the host.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ..binary.fatbin import read_binary, read_cubin_at
from ..facts import CacheEntry, CacheRoot
from .system import System

MAX_ENTRIES = 1000  # binaries read per cache root; a walk stops there and says so
MAX_DEPTH = 6
MAX_SMALL_FILE = 1 << 20  # build.ninja, metadata JSON, version.json are read only below this
NETWORK_FILESYSTEMS = frozenset(
    (
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "ncpfs",
        "afs",
        "lustre",
        "gpfs",
        "beegfs",
        "ceph",
        "glusterfs",
        "fuse.glusterfs",
        "fuse.sshfs",
        "fuse.juicefs",
        "fuse.s3fs",
        "fuse.gcsfuse",
        "fuse.mountpoint-s3",
        "wekafs",
        "9p",
    )
)
_GENCODE = re.compile(r"-gencode[= ]arch=compute_\w+,code=\[?([\w,]+)\]?")
_TORCH_BUILD = re.compile(r"^(py\d+\w*)_(cu\d+|rocm[\d.]+|cpu)$")


def _small_text(path: str) -> Optional[str]:
    try:
        if os.path.getsize(path) > MAX_SMALL_FILE:
            return None
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _mounts(system: System) -> List[Tuple[str, str, str]]:
    """(mount point, fstype, source) from /proc/self/mountinfo, longest mount point first."""
    text = _small_text(system.path("/proc/self/mountinfo")) or ""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        after = line.split(" - ", 1)[1].split()
        if after:
            point = fields[4].replace("\\040", " ")
            mounts.append((point, after[0], after[1] if len(after) > 1 else ""))
    return sorted(mounts, key=lambda m: len(m[0]), reverse=True)


def _filesystem(
    path: str, mounts: List[Tuple[str, str, str]]
) -> Tuple[Optional[str], Optional[str], Optional[str]]:
    """(mount point, fstype, source: "fs01:/export/home") of the mount that holds ``path``."""
    for point, fstype, source in mounts:
        if path == point or path.startswith(point.rstrip("/") + "/"):
            return point, fstype, source
    return None, None, None


def _ninja(directory: str) -> Dict[str, str]:
    """The variables of a build.ninja (``name = value`` lines, continuations joined)."""
    text = _small_text(os.path.join(directory, "build.ninja"))
    if text is None:
        return {}
    values: Dict[str, str] = {}
    for line in text.replace("$\n", " ").splitlines():
        name, sep, value = line.partition(" = ")
        if sep and re.match(r"^\w+$", name):
            values[name] = value.strip()
    return values


def _toolkit_of(ninja: Dict[str, str], system: System) -> Tuple[Optional[str], Optional[str]]:
    home = ninja.get("cuda_home")
    nvcc = ninja.get("nvcc", "")
    if not home and nvcc.endswith("/bin/nvcc"):
        home = nvcc[: -len("/bin/nvcc")]
    if not home or home.startswith("$"):
        return None, None
    text = _small_text(os.path.join(system.path(home), "version.json"))
    try:
        version = json.loads(text)["cuda"]["version"] if text else None
    except (ValueError, KeyError, TypeError):
        version = None
    return home, version if isinstance(version, str) else None


def _gencode(ninja: Dict[str, str]) -> Tuple[str, ...]:
    flags = " ".join(v for k, v in ninja.items() if "cflags" in k or "cuflags" in k)
    codes: List[str] = []
    for match in _GENCODE.finditer(flags):
        codes += [c for c in match.group(1).split(",") if c and c not in codes]
    return tuple(codes)


def _files(root: str, suffixes: Tuple[str, ...]) -> Iterator[str]:
    """Files under ``root`` ending in ``suffixes``, sorted, at most MAX_DEPTH deep, no symlinks."""
    base = root.rstrip("/").count("/")
    for directory, subdirs, files in os.walk(root):
        if directory.count("/") - base >= MAX_DEPTH:
            subdirs[:] = []
        subdirs.sort()
        for name in sorted(files):
            path = os.path.join(directory, name)
            if name.endswith(suffixes) and not os.path.islink(path):
                yield path


def _flashinfer_entry(root: str, path: str, system: System) -> CacheEntry:
    parts = os.path.relpath(path, root).split(os.sep)
    version = parts[0] if len(parts) > 3 and re.match(r"^\d+\.\d+", parts[0]) else None
    archs = parts[1] if version and len(parts) > 4 and parts[2] == "cached_ops" else None
    ninja = _ninja(os.path.dirname(path))
    home, toolkit = _toolkit_of(ninja, system)
    return CacheEntry(
        path,
        os.path.dirname(os.path.relpath(path, root)),
        read_binary(path),
        version,
        archs,
        None,
        None,
        home,
        toolkit,
        _gencode(ninja),
        None,
    )


def _torch_entry(root: str, path: str, system: System) -> CacheEntry:
    relative = os.path.relpath(path, root)
    match = _TORCH_BUILD.match(relative.split(os.sep)[0])
    ninja = _ninja(os.path.dirname(path))
    home, toolkit = _toolkit_of(ninja, system)
    return CacheEntry(
        path,
        os.path.dirname(relative),
        read_binary(path),
        None,
        match.group(0) if match else None,
        match.group(1) if match else None,
        match.group(2) if match else None,
        home,
        toolkit,
        _gencode(ninja),
        None,
    )


def _triton_entry(root: str, path: str, system: System) -> CacheEntry:
    text = _small_text(path[: -len(".cubin")] + ".json")
    try:
        meta = json.loads(text) if text else {}
    except ValueError:
        meta = {}
    meta = meta if isinstance(meta, dict) else {}
    target = meta.get("target") if isinstance(meta.get("target"), dict) else {}
    arch = target.get("arch") if isinstance(target, dict) else None
    version = meta.get("triton_version")
    return CacheEntry(
        path,
        os.path.dirname(os.path.relpath(path, root)),
        read_binary(path),
        version if isinstance(version, str) else None,
        None,
        None,
        None,
        None,
        None,
        (),
        arch if isinstance(arch, int) else None,
    )


CUPY_DIGEST = 32  # hex digits of the md5 CuPy writes before each cached cubin


def _cupy_entry(root: str, path: str, system: System) -> CacheEntry:
    relative = os.path.relpath(path, root)
    return CacheEntry(
        path,
        os.path.basename(relative),
        read_cubin_at(path, CUPY_DIGEST),
        None,
        None,
        None,
        None,
        None,
        None,
        (),
        None,
    )


READERS = {
    "flashinfer": ((".so",), _flashinfer_entry),
    "torch_extensions": ((".so",), _torch_entry),
    "triton": ((".cubin",), _triton_entry),
    "cupy": ((".cubin",), _cupy_entry),
}


def cache_roots(system: System) -> List[Tuple[str, str, str]]:
    """(cache, path, found by) for each cache the environment's variables point at."""
    home = system.getenv("HOME") or (
        os.path.expanduser("~") if system.env_source == "shell" else ""
    )
    roots = (
        _flashinfer_root(system, home),
        _torch_root(system, home),
        _triton_root(system, home),
        _cupy_root(system, home),
    )
    return [root for root in roots if root is not None]


def _flashinfer_root(system: System, home: str) -> Optional[Tuple[str, str, str]]:
    base = system.getenv("FLASHINFER_WORKSPACE_BASE")
    if not (base or home):
        return None
    found = "FLASHINFER_WORKSPACE_BASE" if base else "HOME"
    return ("flashinfer", os.path.join(base or home, ".cache", "flashinfer"), found)


def _torch_root(system: System, home: str) -> Optional[Tuple[str, str, str]]:
    xdg = system.getenv("XDG_CACHE_HOME") or (os.path.join(home, ".cache") if home else "")
    torch = system.getenv("TORCH_EXTENSIONS_DIR")
    if torch:
        return ("torch_extensions", torch, "TORCH_EXTENSIONS_DIR")
    if not xdg:
        return None
    found = "XDG_CACHE_HOME" if system.getenv("XDG_CACHE_HOME") else "HOME"
    return ("torch_extensions", os.path.join(xdg, "torch_extensions"), found)


def _triton_root(system: System, home: str) -> Optional[Tuple[str, str, str]]:
    triton = system.getenv("TRITON_CACHE_DIR")
    triton_home = system.getenv("TRITON_HOME") or home
    if triton:
        return ("triton", triton, "TRITON_CACHE_DIR")
    if not triton_home:
        return None
    found = "TRITON_HOME" if system.getenv("TRITON_HOME") else "HOME"
    return ("triton", os.path.join(triton_home, ".triton", "cache"), found)


def _cupy_root(system: System, home: str) -> Optional[Tuple[str, str, str]]:
    cupy = system.getenv("CUPY_CACHE_DIR")
    if not (cupy or home):
        return None
    found = "CUPY_CACHE_DIR" if cupy else "HOME"
    return ("cupy", cupy or os.path.join(home, ".cupy", "kernel_cache"), found)


def _read_root(
    cache: str, path: str, found_by: str, system: System, mounts: List[Tuple[str, str, str]]
) -> CacheRoot:
    local = system.path(path)
    point, fstype, source = _filesystem(
        os.path.realpath(path) if system.root in ("", "/") else path, mounts
    )
    network = fstype in NETWORK_FILESYSTEMS
    if not os.path.isdir(local):
        return CacheRoot(
            cache, path, found_by, False, fstype, point, network, (), False, None, source
        )
    suffixes, reader = READERS[cache]
    entries: List[CacheEntry] = []
    truncated = False
    problem = None
    try:
        for file in _files(local, suffixes):
            if len(entries) >= MAX_ENTRIES:
                truncated = True
                break
            entries.append(reader(local, file, system))
    except OSError as exc:
        problem = "%s: %s" % (type(exc).__name__, exc)
    return CacheRoot(
        cache,
        path,
        found_by,
        True,
        fstype,
        point,
        network,
        tuple(entries),
        truncated,
        problem,
        source,
    )


def collect_caches(system: System, params: Dict[str, Any]) -> Dict[str, Any]:
    """The JIT caches of the environment's user (``params`` unused: everything comes from the
    environment, so ``--env-from`` gives the service's HOME and cache variables)."""
    mounts = _mounts(system)
    roots = [_read_root(c, p, f, system, mounts) for c, p, f in cache_roots(system)]
    home = system.getenv("HOME")
    return {
        "home": home or (os.path.expanduser("~") if system.env_source == "shell" else None),
        "env_source": system.env_source,
        "roots": [asdict(r) for r in roots],
    }
