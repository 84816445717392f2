"""Symlinked directories inside image layers, and each layer streamed once.

The image (tag linked; built here from the fixture binaries of tests/fixtures/cuda/build.sh):
  layer 1 (gzip): the directory links images have: Debian's merged /usr (``lib -> usr/lib``),
    ``/opt/conda -> /opt/miniforge`` (absolute; miniforge has conda-meta), a venv's
    ``lib64 -> lib``, ``/usr/local/lib -> lib64``, ``/srv/app -> /opt/elsewhere``, and two
    links into each other (``/loop/a``, ``/loop/b``)
  layer 2 (zstd): a distribution written through each link (``lib/python3/dist-packages``,
    ``opt/conda/lib/python3.11/site-packages``, ``opt/venv/lib64/python3.12/site-packages``,
    ``usr/local/lib/python3.12/site-packages``), a whiteout of the link ``/srv/app``, and a
    member through the loop
  layer 3 (plain): a distribution under ``srv/app/...`` (a real directory now, not the link)
A container runtime unpacks a member into its parent directory resolved inside the image (a link
of an earlier or the same layer followed, absolute targets from the image's root), its own name
taken as it is (containerd's archive.Apply: fs.RootPath on the parent, Lstat on the path); a
whiteout deletes the link itself. So each distribution lives where the link points, once.
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import IO

import pytest

from archgap.api import scan_archives
from archgap.image.layout import OciLayout
from archgap.image.read import read_image
from archgap.image.source import Blob
from archgap.probe.binary.fatbin import read_binary
from tests.helpers import CUDA_BIN
from tests.integration.test_images import GPUS, rows
from tests.oci_images import (
    Hardlink,
    Image,
    Layer,
    Member,
    Symlink,
    distribution,
    write_layout,
)

LINKS: dict[str, Member] = {
    "lib": Symlink("usr/lib"),
    "usr/lib/python3/dist-packages": None,
    "opt/miniforge/conda-meta": None,
    "opt/conda": Symlink("/opt/miniforge"),
    "opt/venv/pyvenv.cfg": b"home = /usr/bin\n",
    "opt/venv/lib/python3.12/site-packages": None,
    "opt/venv/lib64": Symlink("lib"),
    "usr/local/lib64": None,
    "usr/local/lib": Symlink("lib64"),
    "opt/elsewhere": None,
    "srv/app": Symlink("/opt/elsewhere"),
    "loop/a": Symlink("b"),
    "loop/b": Symlink("a"),
}
# distribution -> (the site its members are written under, the fixture file it carries)
WRITTEN = {
    "debpkg": ("lib/python3/dist-packages", "libmix.so"),
    "condapkg": ("opt/conda/lib/python3.11/site-packages", "libptxonly.so"),
    "venvpkg": ("opt/venv/lib64/python3.12/site-packages", "k_sm90a.cubin"),
    "localpkg": ("usr/local/lib/python3.12/site-packages", "libcomp_all.so"),
    "apppkg": ("srv/app/lib/python3.12/site-packages", "libcomp_none.so"),
}
# where each lands: the site as the image's file system has it, and the site's kind
LANDS = {
    "debpkg": ("/usr/lib/python3/dist-packages", "system"),
    "condapkg": ("/opt/miniforge/lib/python3.11/site-packages", "conda"),
    "venvpkg": ("/opt/venv/lib/python3.12/site-packages", "venv"),
    "localpkg": ("/usr/local/lib64/python3.12/site-packages", "system"),
    "apppkg": ("/srv/app/lib/python3.12/site-packages", "system"),
}
LOOPED = "loop/a/lib/python3.12/site-packages/x.so"


def installed(name: str) -> dict[str, Member]:
    site, fixture = WRITTEN[name]
    return distribution(name, "1.0", {f"{name}/{fixture}": (CUDA_BIN / fixture).read_bytes()}, site)


def linked_image() -> Image:
    second: dict[str, Member] = {}
    for name in ("debpkg", "condapkg", "venvpkg", "localpkg"):
        second.update(installed(name))
    second["srv/.wh.app"] = b""
    second[LOOPED] = (CUDA_BIN / "libmix.so").read_bytes()
    return Image([Layer(LINKS, "gzip"), Layer(second, "zstd"), Layer(installed("apppkg"), "none")])


def outside_image() -> Image:
    """A RECORD that owns a native file outside its site-packages (``../../../bin``): the one
    case the single pass leaves to a second read of the layer that provides it."""
    site = "usr/local/lib/python3.12/site-packages"
    owned = {f"../../../bin/{name}": b"" for name in ("libmix.so", "libsame.so")}
    members = distribution("outpkg", "1.0", owned, site)
    for name in owned:
        del members[f"{site}/{name}"]
    members["usr/local/bin/libmix.so"] = CUDA_BIN / "libmix.so"
    members["usr/local/bin/libsame.so"] = Hardlink("usr/local/bin/libmix.so")
    return Image([Layer({"usr/local/bin": None}), Layer(members)])


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("links")
    return write_layout(root, {"linked": linked_image(), "outside": outside_image()})


class Counting(OciLayout):
    """The OCI layout source, counting how often each layer blob is opened."""

    def __init__(self, reference: str) -> None:
        super().__init__(reference)
        self.opened: collections.Counter[str] = collections.Counter()

    def open_blob(self, blob: Blob) -> IO[bytes]:
        self.opened[blob.digest] += 1
        return super().open_blob(blob)


def test_distributions_written_through_symlinked_directories_are_found_where_they_live(
    layout: Path,
) -> None:
    source = Counting(f"{layout}:linked")
    contents = read_image(source)
    assert contents.image is not None
    sites = {(s.path, s.kind) for s in contents.image.sites}
    assert sites == set(LANDS.values())  # each once: none under the links' own names
    label = f"oci:{layout}:linked"
    binaries = {b.path: b for b in contents.binaries}
    for dist in contents.distributions:
        site, _ = LANDS[dist.name]
        fixture = WRITTEN[dist.name][1]
        path = f"{label}{site}/{dist.name}/{fixture}"
        assert dist.native_files == (path,), dist.name
        on_disk = read_binary(str(CUDA_BIN / fixture), deep=True)
        assert binaries[path].entries == on_disk.entries and on_disk.entries, dist.name
    assert sorted(d.name for d in contents.distributions) == sorted(LANDS)
    # the whiteout deleted the link /srv/app, not what it pointed at; layer 3's files went into
    # a real /srv/app: nothing of the image is under /opt/elsewhere
    assert not [b for b in binaries if "/opt/elsewhere" in b]
    # the member through the loop is the one problem, naming the layer, the member and why
    [problem] = contents.problems
    assert problem.reason.startswith("layer 2/3 (sha256:"), problem.reason
    assert f"1 member(s) not applied: /{LOOPED}: " in problem.reason
    assert problem.reason.endswith("more than 40 symlinks (a loop)"), problem.reason
    # every layer was streamed (and decompressed) exactly once
    assert sorted(source.opened.values()) == [1, 1, 1]


def test_a_file_a_record_owns_outside_site_packages_takes_a_second_read_of_its_layer(
    layout: Path,
) -> None:
    source = Counting(f"{layout}:outside")
    contents = read_image(source)
    assert contents.problems == []
    [dist] = contents.distributions
    paths = tuple(f"oci:{layout}:outside/usr/local/bin/{n}" for n in ("libmix.so", "libsame.so"))
    assert dist.native_files == paths
    # the file and its hard link, read once from the stream, each under its own name
    assert tuple(b.path for b in contents.binaries) == paths
    expected = read_binary(str(CUDA_BIN / "libmix.so"), deep=True).entries
    assert expected and all(b.entries == expected for b in contents.binaries)
    # layer 1 (a directory) once; layer 2 once for the pass, once more for those files
    assert sorted(source.opened.values()) == [1, 2]


def test_the_linked_image_pushed_to_a_registry_is_judged_the_same(layout: Path) -> None:
    """skopeo pushes the layout to the loopback registry (it keeps the layers as they are):
    the same sites, distributions and verdicts from docker://."""
    from tests.integration.test_registry import push
    from tests.integration.test_remote_services import require

    info = require("registry")
    push(layout, "linked", f"{info['open']}/links/linked:1")
    remote = scan_archives([f"docker://{info['open']}/links/linked:1"], gpus=GPUS)
    local = scan_archives([f"oci:{layout}:linked"], gpus=GPUS)
    [image] = remote.images
    assert {(s.path, s.kind) for s in image.sites} == set(LANDS.values())
    for name in LANDS:
        assert rows(remote.packages, name) == rows(local.packages, name), name
        assert len(rows(remote.packages, name)) == len(GPUS), name
