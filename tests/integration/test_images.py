"""Container images judged before they are deployed: OCI layouts built here from real material
(the fixture binaries built by tests/fixtures/cuda/build.sh, the real nvidia-cuda-runtime wheel),
read as streams with their whiteouts, and judged by the one analysis wheels and installed
environments get.

The image used throughout (tag v1, an index of two platforms):
  linux/amd64  layer 1 (gzip): the nvidia-cuda-runtime 13.0.96 wheel installed into
                 /usr/local/lib/python3.12/site-packages
               layer 2 (zstd): the archgap-fixture distribution (libmix.so, libptxonly.so,
                 k_sm90a.cubin), extra/libcomp_none.so, vendored/libdebug.so (no RECORD owns them)
               layer 3 (plain tar): .wh.libdebug.so in vendored/, extra/ made opaque and
                 extra/libcomp_all.so added, two symlinks that point at each other
  linux/arm64  one layer: the armonly distribution (k_sm120f.cubin)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from archgap.api import scan, scan_archives
from archgap.image.layout import OciLayout
from archgap.image.read import NO_PYTHON, read_image
from archgap.image.source import Platform
from archgap.probe.fatbin import read_binary
from tests.helpers import CUDA_BIN, DATA
from tests.oci_images import (
    SITE,
    Image,
    Layer,
    Member,
    Symlink,
    distribution,
    wheel_files,
    write_layout,
)

RUNTIME = next(iter((DATA / "wheels").glob("nvidia_cuda_runtime-13.0.96-*.whl")), None)
RUNTIME_VENV = DATA / "venv-nvidia-cuda-runtime-13.0.96"
GPUS = ["12.0", "10.0", "9.0", "8.0", "7.5", "GB10"]
FIXTURE_FILES = {
    "fixture_pkg/libmix.so": "libmix.so",
    "fixture_pkg/libptxonly.so": "libptxonly.so",
    "fixture_pkg/k_sm90a.cubin": "k_sm90a.cubin",
}

pytestmark = pytest.mark.skipif(RUNTIME is None, reason="scripts/testdata downloads the wheels")


def fixture_files() -> dict[str, bytes]:
    return {member: (CUDA_BIN / name).read_bytes() for member, name in FIXTURE_FILES.items()}


def amd64_image() -> Image:
    assert RUNTIME is not None
    lower = {
        **distribution("archgap-fixture", "1.0", fixture_files()),
        f"{SITE}/extra/libcomp_none.so": (CUDA_BIN / "libcomp_none.so").read_bytes(),
        f"{SITE}/vendored/libdebug.so": (CUDA_BIN / "libdebug.so").read_bytes(),
    }
    upper: dict[str, Member] = {
        f"{SITE}/vendored/.wh.libdebug.so": b"",
        f"{SITE}/extra/.wh..wh..opq": b"",
        f"{SITE}/extra/libcomp_all.so": (CUDA_BIN / "libcomp_all.so").read_bytes(),
        f"{SITE}/loop/liba.so": Symlink("libb.so"),
        f"{SITE}/loop/libb.so": Symlink("liba.so"),
    }
    return Image([Layer(wheel_files(RUNTIME)), Layer(lower, "zstd"), Layer(upper, "none")])


def arm64_image() -> Image:
    cubin = (CUDA_BIN / "k_sm120f.cubin").read_bytes()
    return Image([Layer(distribution("armonly", "2.0", {"k.cubin": cubin}))], "arm64")


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("oci")
    return write_layout(root, {"v1": [amd64_image(), arm64_image()], "amd": amd64_image()})


def relative(path: str, label: str) -> str:
    assert path.startswith(label + "/"), path
    return path[len(label) + len(SITE) + 2 :]


def test_layers_apply_in_order_with_whiteouts_and_opaque_directories(layout: Path) -> None:
    label = f"oci:{layout}:v1"
    contents = read_image(OciLayout(f"{layout}:v1"))
    assert contents.problems == []
    assert contents.image is not None and contents.image.platform == "linux/amd64"
    assert contents.image.layers == 3
    files = {relative(b.path, label): b for b in contents.binaries}
    # vendored/libdebug.so: deleted by layer 3's whiteout; extra/libcomp_none.so: under a
    # directory layer 3 made opaque; extra/libcomp_all.so: layer 3's own file. The symlink pair
    # is not a file (and is never followed).
    assert sorted(files) == [
        "extra/libcomp_all.so",
        "fixture_pkg/k_sm90a.cubin",
        "fixture_pkg/libmix.so",
        "fixture_pkg/libptxonly.so",
        "nvidia/cu13/lib/libcudadevrt.a",
        "nvidia/cu13/lib/libcudart.so.13",
        "nvidia/cu13/lib/libcudart_static.a",
    ]
    assert [relative(p, label) for p in contents.unowned] == ["extra/libcomp_all.so"]
    dists = {(d.name, d.version): len(d.native_files) for d in contents.distributions}
    assert dists == {("archgap-fixture", "1.0"): 3, ("nvidia-cuda-runtime", "13.0.96"): 3}
    # each member is read by the same reader as the file it was built from
    for member, name in [*FIXTURE_FILES.items(), ("extra/libcomp_all.so", "libcomp_all.so")]:
        on_disk = read_binary(str(CUDA_BIN / name), deep=True)
        found = files[member]
        assert (found.format, found.size, found.machine, found.entries) == (
            on_disk.format, on_disk.size, on_disk.machine, on_disk.entries,
        ), member  # fmt: skip


def test_a_multi_arch_index_gives_the_platform_asked_for(layout: Path) -> None:
    default = read_image(OciLayout(f"{layout}:v1"))  # this machine: linux/amd64
    assert default.image is not None and default.image.architecture == "amd64"
    arm = read_image(OciLayout(f"{layout}:v1"), Platform("linux", "arm64"))
    assert arm.problems == []
    assert arm.image is not None and arm.image.platform == "linux/arm64"
    assert arm.image.elf_machine == "aarch64"
    assert [d.name for d in arm.distributions] == ["armonly"]
    missing = read_image(OciLayout(f"{layout}:v1"), Platform("linux", "s390x"))
    assert missing.distributions == []
    [problem] = missing.problems
    assert "no image for linux/s390x (the index has: linux/amd64, linux/arm64)" in problem.reason


Row = tuple[str, str, str, str, str]


def rows(report_packages: object, name: str) -> set[Row]:
    return {
        (p.package, p.version, p.gpu, p.verdict, p.reason)
        for p in report_packages  # type: ignore[attr-defined]
        if p.package == name
    }


def test_image_verdicts_equal_the_wheel_and_the_installed_package(
    layout: Path, tmp_path: Path
) -> None:
    """One analysis: the runtime's rows from the image equal those from its wheel and from the
    wheel installed --no-deps; the fixture distribution's equal those of a wheel of the same
    files."""
    from tests.oci_images import wheel_of

    assert RUNTIME is not None
    image = scan_archives([f"oci:{layout}:amd"], GPUS)
    wheel = scan_archives([str(RUNTIME)], GPUS)
    installed = scan(str(RUNTIME_VENV / "bin" / "python"), GPUS)
    name = "nvidia-cuda-runtime"
    assert rows(image.packages, name) == rows(wheel.packages, name)
    assert rows(image.packages, name) == rows(installed.packages, name)
    assert len(rows(image.packages, name)) == len(GPUS)
    fixture_wheel = wheel_of(tmp_path, "archgap-fixture", "1.0", fixture_files())
    same = scan_archives([str(fixture_wheel)], GPUS)
    assert rows(image.packages, "archgap-fixture") == rows(same.packages, "archgap-fixture")
    # build.sh: libmix.so has SASS sm_75 and sm_120, k_sm90a.cubin only sm_90a (arch-specific:
    # 9.0 alone), libptxonly.so only PTX compute_80 (JIT on 8.0 and newer): partial on 12.0
    # and 7.5, each naming the libraries with nothing for that GPU
    reasons = {(p.package, p.gpu): (p.verdict, p.reason) for p in image.packages}
    assert reasons[("archgap-fixture", "12.0")] == (
        "partial",
        "1 of 3 libraries have nothing for 12.0: k_sm90a.cubin",
    )
    assert reasons[("archgap-fixture", "7.5")] == (
        "partial",
        "2 of 3 libraries have nothing for 7.5: k_sm90a.cubin, libptxonly.so",
    )


def test_an_image_without_python_is_a_reason(tmp_path: Path) -> None:
    os_release = {"etc/os-release": b'ID=debian\nVERSION_ID="12"\n'}
    library = {"usr/lib/libmix.so": (CUDA_BIN / "libmix.so").read_bytes()}
    write_layout(tmp_path, {"bare": Image([Layer({**os_release, **library})])})
    contents = read_image(OciLayout(f"{tmp_path}:bare"))
    assert contents.distributions == [] and contents.binaries == []
    assert [p.reason for p in contents.problems] == [NO_PYTHON]
