"""The cache collector on odd trees: it never hangs, follows no links, reads nothing huge, and
reports what it saw as values (no exception reaches the caller)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from archgap.probe.environment.jit_caches import MAX_SMALL_FILE, collect_caches
from archgap.probe.environment.system import System


def collect(home: Path, **env: str) -> dict[str, Any]:
    system = System(env=tuple(sorted({"HOME": str(home), **env}.items())))
    return {r["cache"]: r for r in collect_caches(system, {})["roots"]}


def test_fifo_symlinks_and_loops_are_not_followed(tmp_path: Path) -> None:
    ext = tmp_path / ".cache" / "torch_extensions" / "py311_cu128" / "x"
    ext.mkdir(parents=True)
    os.mkfifo(ext / "x.so")  # opening it must not wait for a writer
    (ext / "loop").symlink_to(ext)  # a directory loop
    (ext / "y.so").symlink_to("/usr/lib/nonexistent.so")  # a link is never read
    roots = collect(tmp_path)
    entries = roots["torch_extensions"]["entries"]
    assert [(Path(str(e["path"])).name, e["binary"]["error"]) for e in entries] == [
        ("x.so", "not a regular file")
    ]


def test_garbage_metadata_and_huge_ninja_are_values(tmp_path: Path) -> None:
    triton = tmp_path / "t" / "HASH"
    triton.mkdir(parents=True)
    (triton / "k.cubin").write_bytes(b"not an elf")
    (triton / "k.json").write_text("{ not json")
    fi = tmp_path / ".cache" / "flashinfer" / "0.6.8" / "90a" / "cached_ops" / "n"
    fi.mkdir(parents=True)
    (fi / "n.so").write_bytes(b"")
    (fi / "build.ninja").write_text("cuda_home = /x\n" + "#" * (MAX_SMALL_FILE + 1))
    roots = collect(tmp_path, TRITON_CACHE_DIR=str(tmp_path / "t"))
    (kernel,) = roots["triton"]["entries"]
    assert kernel["metadata_arch"] is None and kernel["package_version"] is None
    (norm,) = roots["flashinfer"]["entries"]
    assert norm["toolkit_home"] is None  # the oversized build.ninja was not read
    assert (norm["package_version"], norm["dir_archs"]) == ("0.6.8", "90a")
    json.dumps(roots)  # the section is plain JSON
