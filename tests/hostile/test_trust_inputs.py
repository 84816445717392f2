"""Inputs named by the user, and the trees below them, are data with edges (issue 37, item 9).

Two rules, each class holding one of them against archgap run as a user runs it (``python -m
archgap``, in another process):

- **A walk stays inside the tree it was given.** A symlink whose target, every link resolved, is
  outside the directory named (``pkg/root -> /``, a sibling directory, a library elsewhere, a
  chain of links that ends outside) is never followed nor read: what lies beyond it is in no
  result, and the link is reported with the reason "a link out of the ...". Links inside the
  tree (``libcublas.so -> libcublas.so.12``, ``lib64 -> lib``, as pip-installed trees have them)
  are still read. The walks: ``kernels DIR``, a directory of wheels, ``trace``'s source walk
  and an OCI layout's files.
- **A named input that is not a regular file is refused at once.** POSIX ``open(2)`` of a FIFO
  for reading blocks until a writer opens it, which no ``--timeout`` can end; opened with
  ``O_NONBLOCK`` it returns at once, and ``fstat`` says it is no regular file. So a FIFO or a
  device named as a ``docker-archive:``, an OCI layout's ``index.json``, a log for ``explain``,
  an ``--env-from`` file, a wheel or a ``kernels`` file gives one line with the reason and exit
  2; ``explain -`` still reads stdin. No FIFO here has a writer: a blocking open would never
  return. Each run has a generous guard (``GUARD_SECONDS``) whose expiry fails the class with
  what blocked; it is a guard against a hang, not a timing assertion.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.oci_images import Image, Layer, distribution, write_layout

BIN = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"
LIB = (BIN / "libmix.so").read_bytes()  # a real library with a fatbin
GUARD_SECONDS = 120
LINK_OUT = "a link out of the"
NOT_REGULAR = "not a regular file"


def archgap(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m archgap ARGS``; a run still going after GUARD_SECONDS fails the class."""
    try:
        return subprocess.run(
            [sys.executable, "-m", "archgap", *args],
            capture_output=True,
            text=True,
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            timeout=GUARD_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"archgap {' '.join(args)} still ran after {GUARD_SECONDS} s: it blocked")


def kernels_rows(*args: str) -> tuple[int, dict[str, dict[str, object]]]:
    """``kernels ARGS --json``: its exit code and its rows by path."""
    result = archgap("kernels", *args, "--json")
    assert "Traceback" not in result.stderr, result.stderr
    rows = {str(row["path"]): row for row in json.loads(result.stdout)["files"]}
    return result.returncode, rows


# --- a walk stays inside the tree it was given ------------------------------------------------


def outside_library(tmp: Path) -> Path:
    """A real library outside the tree: what no walk may read."""
    lib = tmp / "outside" / "lib" / "libsecret.so"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(LIB)
    return lib


def tree(tmp: Path) -> Path:
    """The tree named, with one real library of its own in ``pkg/lib``."""
    lib = tmp / "tree" / "pkg" / "lib"
    lib.mkdir(parents=True)
    (lib / "libmix.so.12").write_bytes(LIB)
    return tmp / "tree"


def expect_out(rows: dict[str, dict[str, object]], top: Path, *links: str) -> None:
    """Each link is a row with the reason and no entries; nothing read came from outside;
    the tree's own library was read."""
    for link in links:
        row = rows.get(str(top / link))
        assert row is not None, sorted(rows)
        assert LINK_OUT in str(row["error"]) and not row["entries"], row
    read = {p for p, r in rows.items() if not r["error"]}
    assert read == {str(top / "pkg/lib/libmix.so.12")}, sorted(read)
    assert not any("libsecret" in p for p in rows), sorted(rows)


def dir_link_to_root(tmp: Path) -> tuple[Path, list[str]]:
    top = tree(tmp)
    (top / "pkg" / "root").symlink_to("/")
    return top, ["pkg/root"]


def dir_link_to_sibling(tmp: Path) -> tuple[Path, list[str]]:
    outside_library(tmp)
    top = tree(tmp)
    (top / "pkg" / "vendor").symlink_to("../../outside")
    return top, ["pkg/vendor"]


def file_link_out(tmp: Path) -> tuple[Path, list[str]]:
    outside_library(tmp)
    top = tree(tmp)
    (top / "pkg" / "lib" / "libcuda.so").symlink_to("../../../outside/lib/libsecret.so")
    return top, ["pkg/lib/libcuda.so"]


def absolute_file_link_out(tmp: Path) -> tuple[Path, list[str]]:
    secret = outside_library(tmp)
    top = tree(tmp)
    (top / "pkg" / "lib" / "libcuda.so.1").symlink_to(secret)
    return top, ["pkg/lib/libcuda.so.1"]


def chain_out(tmp: Path) -> tuple[Path, list[str]]:
    """A link to a link inside the tree, the last one pointing out: both are out."""
    outside_library(tmp)
    top = tree(tmp)
    lib = top / "pkg" / "lib"
    (lib / "libhop.so").symlink_to("../../../outside/lib/libsecret.so")
    (lib / "libfirst.so").symlink_to("libhop.so")
    return top, ["pkg/lib/libfirst.so", "pkg/lib/libhop.so"]


def inside_dir_to_outside(tmp: Path) -> tuple[Path, list[str]]:
    """A directory link inside the tree whose target holds a link out: followed once, the
    link out below it still refused."""
    outside_library(tmp)
    top = tree(tmp)
    (top / "pkg" / "lib" / "sub").mkdir()
    (top / "pkg" / "lib" / "sub" / "libx.so").symlink_to("../../../../outside/lib/libsecret.so")
    (top / "pkg" / "alias").symlink_to("lib/sub")
    return top, ["pkg/alias/libx.so"]  # the directory is walked once, through its first name


WALKS: dict[str, Callable[[Path], tuple[Path, list[str]]]] = {
    "dir-link-to-root": dir_link_to_root,
    "dir-link-to-sibling": dir_link_to_sibling,
    "file-link-out": file_link_out,
    "absolute-file-link-out": absolute_file_link_out,
    "link-chain-out": chain_out,
    "inside-dir-link-to-a-link-out": inside_dir_to_outside,
}


@pytest.mark.parametrize("build", list(WALKS.values()), ids=list(WALKS))
def test_walk_class(build: Callable[[Path], tuple[Path, list[str]]], tmp_path: Path) -> None:
    """``kernels DIR`` reads nothing outside DIR; each link out is a row with its reason."""
    top, links = build(tmp_path)
    code, rows = kernels_rows(str(top))
    expect_out(rows, top, *links)
    assert code == 2  # a row not read: the result is not complete (exit codes: 2)


def test_walk_class_inside_links_still_read(tmp_path: Path) -> None:
    """The other side of the rule: a pip-installed tree's links stay inside and are read
    (``libcublas.so -> libcublas.so.12`` once, by inode; ``lib64 -> lib`` walked once)."""
    top = tree(tmp_path)
    (top / "pkg" / "lib" / "libmix.so").symlink_to("libmix.so.12")
    (top / "pkg" / "lib64").symlink_to("lib")
    code, rows = kernels_rows(str(top))
    assert code == 0 and len(rows) == 1, rows
    ((path, row),) = rows.items()
    assert path.startswith(str(top / "pkg")) and row["error"] is None and row["entries"]


def wheel_dir_link_out(tmp: Path) -> tuple[Path, Path]:
    """A directory of wheels, one of them a link to a wheel outside it."""
    (tmp / "outside").mkdir()
    wheel = tmp / "outside" / "secret-1.0-py3-none-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("secret/libsecret.so", LIB)
    house = tmp / "wheelhouse"
    house.mkdir()
    (house / wheel.name).symlink_to(wheel)
    return house, house / wheel.name


def test_walk_class_wheel_directory(tmp_path: Path) -> None:
    """``kernels DIR`` and ``scan DIR`` over a directory of wheels: a wheel linked in from
    outside is not read, and said."""
    house, link = wheel_dir_link_out(tmp_path)
    code, rows = kernels_rows(str(house))
    assert code == 2 and set(rows) == {str(link)}, rows
    assert LINK_OUT in str(rows[str(link)]["error"])
    scanned = archgap("scan", str(house), "--gpu", "12.0")
    assert scanned.returncode == 2 and LINK_OUT in scanned.stderr, scanned.stderr
    assert "secret" not in scanned.stdout


def test_walk_class_trace_source(tmp_path: Path) -> None:
    """``trace NAME DIR``: a ``.py`` linked in from outside DIR is not read (its assignment is
    not reported), and is named as skipped; one linked inside is read."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "leak.py").write_text('TARGET_CUDA_ARCHS = "outside"\n')
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "mod.py").write_text('TARGET_CUDA_ARCHS = "inside"\n')
    (src / "pkg" / "leak.py").symlink_to("../../outside/leak.py")
    (src / "alias.py").symlink_to("pkg/mod.py")
    result = archgap("trace", "TARGET_CUDA_ARCHS", str(src), "--json")
    assert "Traceback" not in result.stderr, result.stderr
    traced = json.loads(result.stdout)["trace"]
    text = json.dumps(traced["occurrences"])
    assert "outside" not in text and "inside" in text, text
    skipped = {p["subject"]: p["reason"] for p in traced["problems"]}
    assert LINK_OUT in skipped.get(str(src / "pkg" / "leak.py"), ""), skipped


def test_walk_class_oci_blob_link_out(tmp_path: Path) -> None:
    """An OCI layout whose blobs are links to files outside it: refused, never read (even
    though their content would match the digests)."""
    files = distribution("secret", "1.0", {"secret/libsecret.so": LIB})
    layout = write_layout(tmp_path / "layout", {"v1": Image([Layer(files)])})
    store = tmp_path / "outside"
    shutil.move(layout / "blobs" / "sha256", store)
    (layout / "blobs" / "sha256").mkdir()
    for blob in store.iterdir():
        (layout / "blobs" / "sha256" / blob.name).symlink_to(blob)
    code, rows = kernels_rows(f"oci:{layout}:v1")
    assert code == 2 and not any("libsecret" in p for p in rows), rows
    assert any(LINK_OUT in str(r["error"]) for r in rows.values()), rows


# --- a named input that is not a regular file is refused at once ------------------------------


@dataclass(frozen=True)
class Named:
    """A command naming ``{fifo}`` (made with mkfifo, never written) or a device."""

    argv: tuple[str, ...]
    reason: str = NOT_REGULAR
    layout: bool = False  # {fifo} is an OCI layout directory whose index.json is the FIFO


NAMED = {
    "scan-docker-archive-fifo": Named(("scan", "docker-archive:{fifo}", "--timeout", "5")),
    "kernels-docker-archive-fifo": Named(("kernels", "docker-archive:{fifo}")),
    "scan-docker-archive-device": Named(("scan", "docker-archive:/dev/zero"), "character device"),
    "kernels-oci-index-fifo": Named(("kernels", "oci:{fifo}"), layout=True),
    "scan-oci-index-fifo": Named(("scan", "oci:{fifo}", "--timeout", "5"), layout=True),
    "explain-log-fifo": Named(("explain", "{fifo}", "--log-only")),
    "kernels-file-fifo": Named(("kernels", "{fifo}")),
    "scan-env-from-fifo": Named(("scan", "--env-from", "{fifo}", "--gpu", "12.0")),
    "scan-wheel-fifo": Named(("scan", "{fifo}.whl", "--gpu", "12.0")),
}


@pytest.mark.parametrize("named", list(NAMED.values()), ids=list(NAMED))
def test_named_input_class(named: Named, tmp_path: Path) -> None:
    """Exit 2, the reason on one line, and no hang on the FIFO that no one writes to."""
    fifo = tmp_path / "input"
    if named.layout:
        fifo.mkdir()
        (fifo / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
        os.mkfifo(fifo / "index.json")
    elif any("{fifo}.whl" in a for a in named.argv):
        os.mkfifo(f"{fifo}.whl")
    else:
        os.mkfifo(fifo)
    result = archgap(*(a.replace("{fifo}", str(fifo)) for a in named.argv))
    said = result.stdout + result.stderr
    assert result.returncode == 2, said
    assert "Traceback" not in said
    lines = [line for line in said.splitlines() if named.reason in line]
    assert lines, said


def test_named_input_class_explain_stdin(tmp_path: Path) -> None:
    """``explain -`` still reads its log from stdin (a pipe: what the FIFO rule must not
    refuse)."""
    log = "RuntimeError: FlashInfer requires GPUs with sm75 or higher\n"
    result = archgap("explain", "-", "--log-only", "--json", stdin=log)
    assert result.returncode in (0, 1), result.stderr
    assert "sm75" in result.stdout
