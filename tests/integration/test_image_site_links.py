"""Python sites that are links inside an image, found as a container sees them.

The image (tag sites; built here from the fixture binaries of tests/fixtures/cuda/build.sh,
pushed to the loopback registry by skopeo and read back from docker://):
  layer 1 (gzip): the links, none pointing at a path named like a site
    /usr/local/lib/python3.11/site-packages -> /opt/packages   (a system site that is a link)
    /opt/venv/pyvenv.cfg; /opt/venv/lib/python3.12/site-packages -> /srv/deps (a venv's)
    /usr/local/lib/python3.12/site-packages -> /opt/venv/lib/python3.12/site-packages
      (a link to that link: the same directory, reported once)
    /opt/venv2/pyvenv.cfg; /opt/venv2/lib -> /opt/venv2-lib (a venv whose lib is a link)
    /opt/bad/lib/python3.11/site-packages -> site-packages (a link to itself: a loop)
  layer 2 (zstd): a distribution written through each of the first three links
Each link is resolved inside the image as a runtime resolves a member's parent directory (and
the layer applier places layer 2's members there), so each distribution lives in the directory
the link names; sites are reported under that real path, with the kind their link's place says
(pyvenv.cfg next to ``lib``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from archgap.image.layout import OciLayout
from archgap.image.read import ImageContents, read_image
from archgap.image.targets import read_image_target
from archgap.probe.binary.fatbin import read_binary
from tests.helpers import CUDA_BIN
from tests.oci_images import Image, Layer, Member, Symlink, distribution
from tests.oci_images import write_layout as layout_of

LINKS: dict[str, Member] = {
    "usr/local/lib/python3.11/site-packages": Symlink("/opt/packages"),
    "opt/packages": None,
    "opt/venv/pyvenv.cfg": b"home = /usr/bin\n",
    "opt/venv/lib/python3.12/site-packages": Symlink("/srv/deps"),
    "srv/deps": None,
    "usr/local/lib/python3.12/site-packages": Symlink("/opt/venv/lib/python3.12/site-packages"),
    "opt/venv2/pyvenv.cfg": b"home = /usr/bin\n",
    "opt/venv2-lib/python3.12/site-packages": None,
    "opt/venv2/lib": Symlink("/opt/venv2-lib"),
    "opt/bad/lib/python3.11/site-packages": Symlink("site-packages"),
}
# distribution -> (the site its members are written under, the fixture it carries)
WRITTEN = {
    "syspkg": ("usr/local/lib/python3.11/site-packages", "libmix.so"),
    "venvpkg": ("opt/venv/lib/python3.12/site-packages", "k_sm90a.cubin"),
    "venv2pkg": ("opt/venv2/lib/python3.12/site-packages", "libptxonly.so"),
}
# where each lives: (the site's real path, its Python version, its kind)
LIVES = {
    "syspkg": ("/opt/packages", "3.11", "system"),
    "venvpkg": ("/srv/deps", "3.12", "venv"),
    "venv2pkg": ("/opt/venv2-lib/python3.12/site-packages", "3.12", "venv"),
}
LOOP = "/opt/bad/lib/python3.11/site-packages"


def sites_image() -> Image:
    second: dict[str, Member] = {}
    for name, (site, fixture) in WRITTEN.items():
        files = {f"{name}/{fixture}": (CUDA_BIN / fixture).read_bytes()}
        second.update(distribution(name, "1.0", files, site))
    return Image([Layer(LINKS, "gzip"), Layer(second, "zstd")])


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return layout_of(tmp_path_factory.mktemp("sites"), {"sites": sites_image()})


def check_sites(label: str, contents: ImageContents) -> None:
    assert contents.image is not None
    sites = sorted((s.path, s.python_version, s.kind) for s in contents.image.sites)
    assert sites == sorted(LIVES.values())  # each once, under its real path
    assert sorted(contents.site_packages) == sorted(label + s[0] for s in LIVES.values())
    binaries = {b.path: b for b in contents.binaries}
    assert sorted(d.name for d in contents.distributions) == sorted(LIVES)
    for dist in contents.distributions:
        fixture = WRITTEN[dist.name][1]
        path = f"{label}{LIVES[dist.name][0]}/{dist.name}/{fixture}"
        assert dist.native_files == (path,), dist.name
        # the same entries as the fixture file read from disk (cuobjdump agreement on the
        # fixtures: test_kernels_cuobjdump)
        on_disk = read_binary(str(CUDA_BIN / fixture), deep=True)
        assert binaries[path].entries == on_disk.entries and on_disk.entries, dist.name
    # the link to itself is the one problem, naming it
    [problem] = contents.problems
    assert problem.reason == (
        f"{LOOP} (a link on the way to a Python site): {LOOP}: more than 40 symlinks (a loop)"
    )


def test_sites_that_are_links_are_found_under_their_real_path(layout: Path) -> None:
    check_sites(f"oci:{layout}:sites", read_image(OciLayout(f"{layout}:sites")))


def test_the_site_links_image_pushed_to_a_registry_is_read_the_same(layout: Path) -> None:
    from tests.integration.test_registry import push
    from tests.integration.test_remote_services import require

    info = require("registry")
    push(layout, "sites", f"{info['open']}/links/sites:1")
    label = f"docker://{info['open']}/links/sites:1"
    check_sites(label, read_image_target(label))
