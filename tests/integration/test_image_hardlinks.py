"""Hard links to files of lower layers, as a container runtime applies them.

In a layer tar a hard link (type '1') names its target by ``linkname``. containerd's
archive.Apply makes it with ``os.Link`` to that name in the file system unpacked so far (its
parent directory resolved inside the root, its last component taken as it is): the target may
be a file an earlier layer added, and it must still be there (not deleted by a whiteout since).
Once linked, the name keeps the file's bytes even when a later layer deletes the original.

The image (tag hard; built here from the fixture binaries of tests/fixtures/cuda/build.sh,
pushed to the loopback registry by skopeo and read back from docker://):
  layer 1 (gzip): /opt/cuda/lib/k_sm90a.cubin and /opt/cuda/lib/libmix.so (the fixture
    files), /opt/gone/libptxonly.so, two symlinks into each other (/loop/a, /loop/b)
  layer 2 (zstd): .wh.gone in /opt (deletes /opt/gone); the distribution hardpkg, whose RECORD
    lists five native files, all hard links: k_sm90a.cubin to layer 1's cubin, libmix.so to
    /usr/local/bin/libmix.so (itself a hard link of this layer to layer 1's libmix.so),
    libgone.so to the deleted /opt/gone/libptxonly.so, libnothing.so to a path no layer has,
    libloop.so to a file under the loop
  layer 3 (plain): .wh.lib in /opt/cuda (deletes the originals the links name)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from archgap.image.layout import OciLayout
from archgap.image.read import ImageContents, read_image
from archgap.image.targets import read_image_target
from archgap.probe.facts import BinaryFacts
from tests.helpers import CUDA_BIN
from tests.integration.test_kernels_cuobjdump import CUOBJDUMP, cuobjdump_names, our_names
from tests.oci_images import SITE, Hardlink, Image, Layer, Member, Symlink, distribution
from tests.oci_images import write_layout as layout_of

PKG = f"{SITE}/hardpkg"
LINKED = {  # the member in the site -> the path it hard-links to
    "k_sm90a.cubin": "opt/cuda/lib/k_sm90a.cubin",  # layer 1
    "libmix.so": "usr/local/bin/libmix.so",  # layer 2, itself a link to layer 1's libmix.so
    "libgone.so": "opt/gone/libptxonly.so",  # deleted by layer 2's whiteout before the link
    "libnothing.so": "opt/none/libx.so",  # no layer has it
    "libloop.so": "loop/a/libx.so",  # its directory is a symlink loop
}
# What cuobjdump 13.0 lists for the fixture files (build.sh asked nvcc for these targets):
# k_sm90a.cubin: --list-elf "ELF file 1: k_sm90a.sm_90a.cubin", no PTX;
# libmix.so: --list-elf sm_75 sm_90 sm_90a sm_100a sm_103 sm_120 sm_120a, each twice (the
# device-link step embeds the cubins again); --list-ptx sm_75 sm_120a sm_100f
LISTED = {
    "k_sm90a.cubin": (["sm_90a"], []),
    "libmix.so": (
        ["sm_75", "sm_90", "sm_90a", "sm_100a", "sm_103", "sm_120", "sm_120a"] * 2,
        ["sm_75", "sm_120a", "sm_100f"],
    ),
}


def hardlinked_image() -> Image:
    lower: dict[str, Member] = {
        "opt/cuda/lib/k_sm90a.cubin": CUDA_BIN / "k_sm90a.cubin",
        "opt/cuda/lib/libmix.so": CUDA_BIN / "libmix.so",
        "opt/gone/libptxonly.so": CUDA_BIN / "libptxonly.so",
        "loop/a": Symlink("b"),
        "loop/b": Symlink("a"),
    }
    second: dict[str, Member] = {
        "opt/.wh.gone": b"",
        "usr/local/bin/libmix.so": Hardlink("opt/cuda/lib/libmix.so"),
    }
    second.update(distribution("hardpkg", "1.0", {f"hardpkg/{n}": b"" for n in LINKED}))
    second.update({f"{PKG}/{name}": Hardlink(target) for name, target in LINKED.items()})
    upper: dict[str, Member] = {"opt/cuda/.wh.lib": b""}
    return Image([Layer(lower, "gzip"), Layer(second, "zstd"), Layer(upper, "none")])


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return layout_of(tmp_path_factory.mktemp("hard"), {"hard": hardlinked_image()})


def binaries(label: str, found: list[BinaryFacts]) -> dict[str, BinaryFacts]:
    prefix = f"{label}/{PKG}/"
    assert all(b.path.startswith(prefix) for b in found), [b.path for b in found]
    return {b.path[len(prefix) :]: b for b in found}


def check_hardlinked(label: str, contents: ImageContents) -> None:
    found = binaries(label, contents.binaries)
    [dist] = contents.distributions
    assert dist.native_files == tuple(f"{label}/{PKG}/{n}" for n in sorted(LINKED))
    # the links to files of layer 1 are read from layer 1, under their own names, although
    # layer 3 deleted the originals
    for name, (sass, ptx) in LISTED.items():
        assert found[name].format != "unreadable", found[name].error
        assert our_names(found[name], "sass") == sass, name
        assert our_names(found[name], "ptx") == ptx, name
    # the bad links: each a problem value naming the member and why, not a traceback
    [problem] = contents.problems
    assert problem.reason.startswith("layer 2/3 (sha256:"), problem.reason
    reasons = problem.reason.split(": 3 member(s) not applied: ", 1)[1].split("; ")
    assert reasons == [
        f"/{PKG}/libgone.so: hard link to /opt/gone/libptxonly.so: /opt/gone: not in the image",
        f"/{PKG}/libnothing.so: hard link to /opt/none/libx.so: /opt/none: not in the image",
        f"/{PKG}/libloop.so: hard link to /loop/a/libx.so: /loop/a: more than 40 symlinks (a loop)",
    ]
    for name in ("libgone.so", "libnothing.so", "libloop.so"):  # owned, but not in the image
        assert found[name].format == "unreadable", name
        assert found[name].error == f"/{PKG}/{name}: not in the image", found[name].error


def test_hard_links_to_lower_layers_read_the_file_they_link_to(layout: Path) -> None:
    contents = read_image(OciLayout(f"{layout}:hard"))
    check_hardlinked(f"oci:{layout}:hard", contents)


@pytest.mark.skipif(CUOBJDUMP is None, reason="scripts/testdata installs cuobjdump")
def test_the_fixture_files_are_listed_by_cuobjdump_as_stated() -> None:
    for name, (sass, ptx) in LISTED.items():
        assert cuobjdump_names(CUDA_BIN / name, "--list-elf") == sass, name
        assert cuobjdump_names(CUDA_BIN / name, "--list-ptx") == ptx, name


def test_the_hardlinked_image_pushed_to_a_registry_is_read_the_same(layout: Path) -> None:
    """skopeo pushes the layout to the loopback registry (the layers as they are)."""
    from tests.integration.test_registry import push
    from tests.integration.test_remote_services import require

    info = require("registry")
    push(layout, "hard", f"{info['open']}/links/hard:1")
    label = f"docker://{info['open']}/links/hard:1"
    check_hardlinked(label, read_image_target(label))
