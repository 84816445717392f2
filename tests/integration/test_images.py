"""Container images judged before they are deployed: OCI layouts built here from real material
(the fixture binaries built by tests/fixtures/cuda/build.sh, the real nvidia-cuda-runtime wheel),
read as streams with their whiteouts, and judged by the one analysis wheels and installed
environments get.

The image used throughout (tag v1, an index of two platforms; tag amd the amd64 image alone):
  linux/amd64  layer 1 (gzip): the nvidia-cuda-runtime 13.0.96 wheel installed into
                 /usr/local/lib/python3.12/site-packages
               layer 2 (zstd): the archgap-fixture distribution (libmix.so, libptxonly.so,
                 k_sm90a.cubin), extra/libcomp_none.so, vendored/libdebug.so (no RECORD owns them)
               layer 3 (plain tar): .wh.libdebug.so in vendored/, extra/ made opaque and
                 extra/libcomp_all.so added, two symlinks that point at each other
  linux/arm64  one layer: the armonly distribution (k_sm120f.cubin)
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from collections.abc import Iterable
from pathlib import Path

import pytest

from archgap.analysis.verdicts.verdicts import PackageVerdict
from archgap.api import scan, scan_archives
from archgap.image.layout import OciLayout
from archgap.image.read import NO_PYTHON, read_image
from archgap.image.source import REF_NAME, Platform
from archgap.image.targets import read_image_target
from archgap.probe.binary.fatbin import read_binary
from tests.helpers import CUDA_BIN, DATA, in_child, json_output, run_cli
from tests.oci_images import (
    SITE,
    Hardlink,
    Image,
    Layer,
    Member,
    Symlink,
    compress,
    distribution,
    tar_of,
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


def amd64_image(compression: tuple[str, str, str] = ("gzip", "zstd", "none")) -> Image:
    files = amd64_files()
    return Image([Layer(f, how) for f, how in zip(files, compression, strict=True)])


def amd64_files() -> list[dict[str, Member]]:
    assert RUNTIME is not None
    lower: dict[str, Member] = {
        **distribution("archgap-fixture", "1.0", fixture_files()),
        f"{SITE}/extra/libcomp_none.so": CUDA_BIN / "libcomp_none.so",
        f"{SITE}/vendored/libdebug.so": CUDA_BIN / "libdebug.so",
    }
    upper: dict[str, Member] = {
        f"{SITE}/vendored/.wh.libdebug.so": b"",
        f"{SITE}/extra/.wh..wh..opq": b"",
        f"{SITE}/extra/libcomp_all.so": CUDA_BIN / "libcomp_all.so",
        f"{SITE}/loop/liba.so": Symlink("libb.so"),
        f"{SITE}/loop/libb.so": Symlink("liba.so"),
    }
    return [wheel_files(RUNTIME), lower, upper]


def arm64_image() -> Image:
    cubin = (CUDA_BIN / "k_sm120f.cubin").read_bytes()
    return Image([Layer(distribution("armonly", "2.0", {"k.cubin": cubin}))], "arm64")


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("oci")
    # tag amd: the amd64 image with gzip'd layers (skopeo's docker-archive cannot take zstd)
    gzipped = amd64_image(("gzip", "gzip", "gzip"))
    return write_layout(root, {"v1": [amd64_image(), arm64_image()], "amd": gzipped})


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
    untagged = read_image(OciLayout(str(layout)))
    assert "several images, name one: amd, v1" in untagged.problems[0].reason


Row = tuple[str, str, str, str, str]


def rows(packages: Iterable[PackageVerdict], name: str) -> set[Row]:
    return {
        (p.package, p.version, p.gpu, p.verdict, p.reason) for p in packages if p.package == name
    }


def test_image_verdicts_equal_the_wheel_and_the_installed_package(
    layout: Path, tmp_path: Path
) -> None:
    """One analysis: the runtime's rows from the image equal those from its wheel and from the
    wheel installed --no-deps; the fixture distribution's equal those of a wheel of the same
    files."""
    from tests.oci_images import wheel_of

    assert RUNTIME is not None
    image = scan_archives([f"oci:{layout}:amd"], gpus=GPUS)
    wheel = scan_archives([str(RUNTIME)], gpus=GPUS)
    installed = scan(str(RUNTIME_VENV / "bin" / "python"), gpus=GPUS)
    name = "nvidia-cuda-runtime"
    assert rows(image.packages, name) == rows(wheel.packages, name)
    assert rows(image.packages, name) == rows(installed.packages, name)
    assert len(rows(image.packages, name)) == len(GPUS)
    fixture_wheel = wheel_of(tmp_path, "archgap-fixture", "1.0", fixture_files())
    same = scan_archives([str(fixture_wheel)], gpus=GPUS)
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
    library: dict[str, Member] = {"usr/lib/libmix.so": CUDA_BIN / "libmix.so"}
    write_layout(tmp_path, {"bare": Image([Layer({**os_release, **library})])})
    contents = read_image(OciLayout(f"{tmp_path}:bare"))
    assert contents.distributions == [] and contents.binaries == []
    assert [p.reason for p in contents.problems] == [NO_PYTHON]


def test_a_docker_archive_written_by_skopeo_is_judged_like_the_oci_layout(
    layout: Path, tmp_path: Path
) -> None:
    """skopeo converts the OCI image (its zstd and gzip layers) into a docker save tarball
    (manifest.json with Config and Layers, the layers uncompressed): same distributions, same
    members, same verdicts."""
    archive = tmp_path / "image.tar"
    copy = subprocess.run(
        ["skopeo", "copy", "--quiet", f"oci:{layout}:amd", f"docker-archive:{archive}:test/img:1"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert copy.returncode == 0, copy.stderr
    with tarfile.open(archive) as tar:
        assert "manifest.json" in tar.getnames()
    from_oci = scan_archives([f"oci:{layout}:amd"], gpus=GPUS)
    from_tar = scan_archives([f"docker-archive:{archive}"], gpus=GPUS)
    assert from_tar.problems == ()
    for name in ("nvidia-cuda-runtime", "archgap-fixture", "(no distribution)"):
        assert rows(from_tar.packages, name) == rows(from_oci.packages, name), name
    [image] = from_tar.images
    assert (image.platform, image.layers) == ("linux/amd64", 3)
    oci_files = {relative(b.path, f"oci:{layout}:amd"): b.entries for b in from_oci.binaries}
    tar_files = {
        relative(b.path, f"docker-archive:{archive}"): b.entries for b in from_tar.binaries
    }
    assert tar_files == oci_files
    tagged = scan_archives([f"docker-archive:{archive}:test/img:1"], gpus=GPUS)
    assert rows(tagged.packages, "archgap-fixture") == rows(from_oci.packages, "archgap-fixture")


def copy_layout(layout: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "layout"
    shutil.copytree(layout, copy)
    return copy


def layer_blobs(root: Path, tag: str) -> list[Path]:
    """The layer blob files of the image ``tag`` points at (a single-platform tag)."""
    index = json.loads((root / "index.json").read_text())
    [entry] = [m for m in index["manifests"] if m["annotations"][REF_NAME] == tag]
    manifest = json.loads(blob_path(root, entry["digest"]).read_text())
    return [blob_path(root, layer["digest"]) for layer in manifest["layers"]]


def blob_path(root: Path, digest: str) -> Path:
    return root / "blobs" / "sha256" / digest.removeprefix("sha256:")


def problems_of(target: str) -> list[str]:
    return [p.reason for p in read_image_target(target).problems]


def test_a_truncated_layer_and_a_missing_blob_are_reasons(layout: Path, tmp_path: Path) -> None:
    root = copy_layout(layout, tmp_path)
    first, second, _third = layer_blobs(root, "amd")
    whole = second.read_bytes()
    second.write_bytes(whole[: len(whole) // 2])  # the zstd layer, cut in the middle
    contents = read_image_target(f"oci:{root}:amd")
    [problem] = contents.problems
    assert problem.reason.startswith("layer 2/3 (sha256:")
    # layers 1 and 3 are still read: the runtime's distribution is judged
    assert "nvidia-cuda-runtime" in [d.name for d in contents.distributions]
    first.unlink()
    missing = problems_of(f"oci:{root}:amd")
    assert any(f"missing blob sha256:{first.name}" in p for p in missing), missing


MANIFEST_START = b'{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json"'


def test_corrupt_gzip_bad_json_and_a_wrong_digest_are_reasons(tmp_path: Path) -> None:
    files = distribution("archgap-fixture", "1.0", fixture_files())
    good = compress(tar_of(files), "gzip")[0]
    broken = bytearray(good)
    broken[len(broken) // 2 : len(broken) // 2 + 64] = bytes(64)  # deflate data zeroed
    root = write_layout(tmp_path / "gz", {"t": Image([Layer(files, raw=bytes(broken))])})
    reason, nothing = problems_of(f"oci:{root}:t")
    assert reason.startswith("layer 1/1 (sha256:") and "cannot read" in reason, reason
    assert nothing == NO_PYTHON  # what the layer held before the damage has no RECORD
    (root / "index.json").write_text('{"manifests": [')
    [reason] = problems_of(f"oci:{root}:t")
    assert reason.startswith("index.json: not JSON"), reason
    other = write_layout(tmp_path / "digest", {"t": Image([Layer(files)])})
    [manifest] = [
        p
        for p in (other / "blobs" / "sha256").iterdir()
        if p.read_bytes().startswith(MANIFEST_START)
    ]
    manifest.write_bytes(
        manifest.read_bytes().replace(b'"schemaVersion": 2', b'"schemaVersion":2 ')
    )
    [reason] = problems_of(f"oci:{other}:t")
    assert f"content does not match its digest sha256:{manifest.name}" in reason, reason


def test_symlinks_in_layers_resolve_inside_the_image_never_on_this_machine(
    tmp_path: Path,
) -> None:
    """A RECORD that lists links: a loop, an absolute link to a library this machine has (but the
    image has not), a relative link climbing above the root, and a good link to a real file."""
    host_lib = next(p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/bin/sh") if Path(p).exists())
    files: dict[str, Member] = {
        **distribution(
            "linked", "1.0",
            {"lib/real.so": (CUDA_BIN / "libmix.so").read_bytes(), "lib/libloop.so": b"",
             "lib/libhost.so": b"", "lib/libup.so": b"", "lib/libgood.so": b""},
        ),
        f"{SITE}/lib/libloop.so": Symlink("libloop2.so"),
        f"{SITE}/lib/libloop2.so": Symlink("libloop.so"),
        f"{SITE}/lib/libhost.so": Symlink(host_lib),
        f"{SITE}/lib/libup.so": Symlink("../" * 12 + host_lib.lstrip("/")),
        f"{SITE}/lib/libgood.so": Symlink("real.so"),
        f"{SITE}/lib/hard.so": Hardlink(f"{SITE}/lib/real.so"),  # a second name, unowned
    }  # fmt: skip
    root = write_layout(tmp_path, {"t": Image([Layer(files)])})
    contents = read_image_target(f"oci:{root}:t")
    found = {relative(b.path, f"oci:{root}:t"): b for b in contents.binaries}
    assert found["lib/libloop.so"].format == "unreadable"
    assert "more than 40 symlinks (a loop)" in (found["lib/libloop.so"].error or "")
    for name in ("lib/libhost.so", "lib/libup.so"):
        assert found[name].format == "unreadable", name
        # the first part of the path the image does not have ("/lib" in this one)
        assert found[name].error == f"/{host_lib.split('/')[1]}: not in the image", name
    good = read_binary(str(CUDA_BIN / "libmix.so"), deep=True)
    assert found["lib/libgood.so"].entries == good.entries and good.entries
    assert found["lib/hard.so"].entries == good.entries  # read from the file it links to


def zstd_without_the_module(target: str) -> list[str]:
    import sys

    sys.modules["zstandard"] = None  # type: ignore[assignment]  # as if not installed
    return problems_of(target)


def test_a_zstd_layer_without_the_zstandard_module_is_a_reason(layout: Path) -> None:
    reasons = in_child(zstd_without_the_module, f"oci:{layout}:v1")
    assert any(
        r.startswith("layer 2/3 (sha256:")
        and "a zstd-compressed layer, and the 'zstandard' module is not installed" in r
        for r in reasons
    ), reasons


def test_an_image_config_that_contradicts_its_files_is_a_problem(tmp_path: Path) -> None:
    files = distribution("mislabelled", "1.0", {"libmix.so": (CUDA_BIN / "libmix.so").read_bytes()})
    root = write_layout(tmp_path, {"t": Image([Layer(files)], "arm64")})
    report = scan_archives([f"oci:{root}:t"], gpus=["GB10"])
    # the config says arm64 (aarch64): the runtime takes it for GB10 (aarch64), but libmix.so
    # is an x86-64 ELF file (build.sh builds on this x86-64 machine)
    assert report.platform == ()
    [problem] = [p for p in report.problems if p.subject == f"oci:{root}:t"]
    assert problem.reason == (
        "the config says linux/arm64 (aarch64) but 1 native files are x86-64: they cannot be "
        "loaded in this image on any host"
    )


def test_an_unpacked_root_file_system_is_read_without_following_its_links(
    layout: Path, tmp_path: Path
) -> None:
    rootfs = tmp_path / "rootfs"
    (rootfs / "etc").mkdir(parents=True)
    (rootfs / "etc" / "os-release").write_text('ID=debian\nVERSION_ID="12"\n')
    venv = rootfs / "opt" / "venv"
    site = venv / "lib" / "python3.12" / "site-packages"
    (venv / "pyvenv.cfg").parent.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    members = distribution("archgap-fixture", "1.0", fixture_files(), site="")
    for name, data in members.items():
        assert isinstance(data, bytes)
        (site / name.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (site / name.lstrip("/")).write_bytes(data)
    host = site / "fixture_pkg" / "libhost.so"
    host.symlink_to(CUDA_BIN / "libmix.so")  # absolute: a path of this machine, not the image's
    before = sorted(str(p) for p in rootfs.rglob("*"))
    for target in (f"rootfs:{rootfs}", str(rootfs)):
        report = scan_archives([target], gpus=GPUS)
        oci = scan_archives([f"oci:{layout}:amd"], gpus=GPUS)
        assert rows(report.packages, "archgap-fixture") == rows(oci.packages, "archgap-fixture")
        [image] = report.images
        [venv_site] = image.sites
        assert (venv_site.path, venv_site.kind) == (
            "/opt/venv/lib/python3.12/site-packages",
            "venv",
        )
        paths = [b.path for b in report.binaries]
        assert str(host) not in paths  # a link under site-packages no RECORD lists: not a file
    assert sorted(str(p) for p in rootfs.rglob("*")) == before
    # kernels walks a directory's every file; rootfs: reads it as an image (its Python only)
    outside = rootfs / "usr" / "lib" / "libplain.a"
    outside.parent.mkdir(parents=True)
    outside.write_bytes((CUDA_BIN / "libplain.a").read_bytes())
    walked = json_output(run_cli("kernels", str(rootfs), "--json"), "kernels")["files"]
    assert str(outside) in [f["path"] for f in walked]
    as_image = json_output(run_cli("kernels", f"rootfs:{rootfs}", "--json"), "kernels")["files"]
    assert str(outside) not in [f["path"] for f in as_image]
    assert f"{site}/fixture_pkg/libmix.so" in [f["path"] for f in as_image]


def test_the_cli_judges_images_with_a_schema_valid_document_and_exit_codes(layout: Path) -> None:
    arm = run_cli(
        "scan", f"oci:{layout}:v1", "--platform", "linux/arm64", "--gpu", "GB10", "--json"
    )
    # k_sm120f.cubin: family SASS sm_120f runs on 12.0 and 12.1 (GB10); the image is arm64 like
    # GB10's Grace CPU: no gap
    assert arm.returncode == 0, arm.stderr
    doc = json_output(arm, "scan")
    assert [(i["platform"], i["layers"]) for i in doc["images"]] == [("linux/arm64", 1)]
    assert {(p["package"], p["verdict"]) for p in doc["packages"]} == {("armonly", "native")}
    amd = run_cli("scan", f"oci:{layout}:v1", "--gpu", "GB10", "--json")
    assert amd.returncode == 1, amd.stderr
    [finding] = json_output(amd, "scan")["platform"]
    assert (finding["environment_cpu"], finding["host_cpu"]) == ("x86-64", "aarch64")
    assert "the image's config says linux/amd64" in finding["cause"]
    listed = run_cli("kernels", f"oci:{layout}:v1", "--platform", "arm64", "--json")
    assert listed.returncode == 0, listed.stderr
    files = json_output(listed, "kernels")["files"]
    assert [f["path"] for f in files] == [f"oci:{layout}:v1/{SITE}/k.cubin"]


def test_an_image_that_cannot_be_judged_exits_2_with_the_reason(tmp_path: Path) -> None:
    os_release = {"etc/os-release": b'ID=debian\nVERSION_ID="12"\n'}
    root = write_layout(tmp_path, {"bare": Image([Layer(os_release)])})
    for args in (["scan", f"oci:{root}:bare"], ["scan", f"oci:{tmp_path}/nothing:x"]):
        result = run_cli(*args)
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr
    assert NO_PYTHON in run_cli("scan", f"oci:{root}:bare").stderr
    listed = run_cli("kernels", f"docker-archive:{tmp_path}/missing.tar")
    assert listed.returncode == 2 and "not a readable tar" in listed.stdout + listed.stderr


def test_images_of_different_cpus_judged_together_each_get_their_own_platform_finding(
    tmp_path: Path,
) -> None:
    """Three single-platform images in one scan: amd64, ppc64le and arm64 (each holding a cubin,
    which has no host CPU of its own). GB10 systems are aarch64 (kb/gpus.json): the amd64 image
    (x86-64) and the ppc64le one (ppc64) cannot run there, the arm64 one can; the RTX PRO 6000
    goes into hosts of any CPU (no finding)."""
    cubin = (CUDA_BIN / "k_sm120f.cubin").read_bytes()
    images = {
        arch: Image([Layer(distribution(f"on-{arch}", "1.0", {"k.cubin": cubin}))], arch)
        for arch in ("amd64", "ppc64le", "arm64")
    }
    root = write_layout(tmp_path, dict(images))
    targets = [f"oci:{root}:{arch}" for arch in images]
    result = run_cli("scan", *targets, "--gpu", "GB10", "--gpu", "RTX PRO 6000", "--json")
    assert result.returncode == 1, result.stderr  # a platform gap on a named GPU
    doc = json_output(result, "scan")
    found = {(f["image"], f["gpu"], f["environment_cpu"], f["host_cpu"]) for f in doc["platform"]}
    assert found == {
        (f"oci:{root}:amd64", "GB10", "x86-64", "aarch64"),
        (f"oci:{root}:ppc64le", "GB10", "ppc64", "aarch64"),
    }
    causes = {f["image"]: f["cause"] for f in doc["platform"]}
    assert causes[f"oci:{root}:ppc64le"].startswith(
        f"the image oci:{root}:ppc64le is ppc64 (its config says linux/ppc64le), and GB10 "
        "systems are aarch64"
    )
    # k_sm120f.cubin: family SASS sm_120f runs on 12.0 and 12.1 (GB10), but only the arm64
    # image runs on a GB10 host: the others' packages cannot load there (blocked)
    verdicts = {(p["package"], p["gpu"]): p["verdict"] for p in doc["packages"]}
    assert verdicts == {
        ("on-amd64", "GB10"): "blocked",
        ("on-ppc64le", "GB10"): "blocked",
        ("on-arm64", "GB10"): "native",
        **{(f"on-{arch}", "RTX PRO 6000"): "native" for arch in images},
    }
    # one image alone: the same finding, worded for the one image
    [alone] = scan_archives([f"oci:{root}:amd64"], gpus=["GB10"]).platform
    assert alone.image == f"oci:{root}:amd64"
    assert alone.cause.startswith("this image is x86-64 (the image's config says linux/amd64)")
