"""Conda packages judged before installing them, in both formats (.conda and .tar.bz2).

The packages are made by conda's own format library, conda-package-handling (``cph``, the
producer conda-build uses), from a package tree of real files: libcudart.so.13 and
libcudadevrt.a as installed from NVIDIA's nvidia-cuda-runtime wheel (tests/.data, scripts/testdata),
and libmix.so / libhidden.so / k_sm90a.cubin built by nvcc 13.0 from tests/fixtures/cuda (build.sh).
The ``info/`` files follow conda's package format: index.json (name, version, build, subdir),
paths.json and files. The machine reaches no conda channel, so no package from anaconda.org.

A member is the same bytes as the file it was packed from, so the reader must find the same
entries at the same offsets as in that file, cuobjdump must list the same targets, and the
analysis must judge the package as the rules below say.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import shutil
import threading
import zipfile
from pathlib import Path

import conda_package_handling.api as cph_api  # type: ignore[import-untyped]
import pytest

from archgap.api import scan_archives
from archgap.index.conda import read_conda
from archgap.probe.binary.fatbin import read_binary
from archgap.targets import read_targets
from tests.helpers import DATA, FIXTURES, in_child, json_output, run_cli
from tests.integration.test_kernels_cuobjdump import CUOBJDUMP, cuobjdump_names, our_names

RUNTIME_LIB = next(
    iter(DATA.glob("venv-nvidia-cuda-runtime-13.0.96/lib/python*/site-packages/nvidia/cu13/lib")),
    None,
)
BIN = FIXTURES / "cuda" / "bin"
NAME, VERSION, BUILD = "cuda-demo", "13.0.96", "h1234567_0"
# member in the package -> the real file it is packed from
FILES = {
    "lib/libcudart.so.13": "runtime:libcudart.so.13",
    "lib/libcudadevrt.a": "runtime:libcudadevrt.a",
    "lib/python3.11/site-packages/demo/libmix.so": "bin:libmix.so",
    "lib/libhidden.so": "bin:libhidden.so",
    "share/demo/k_sm90a.cubin": "bin:k_sm90a.cubin",
}
UNLISTED = "lib/libextra.so"  # packed, but not in info/paths.json: unowned

pytestmark = pytest.mark.skipif(
    RUNTIME_LIB is None or CUOBJDUMP is None,
    reason="scripts/testdata installs nvidia-cuda-runtime and cuobjdump",
)


def source(spec: str) -> Path:
    where, name = spec.split(":")
    assert RUNTIME_LIB is not None
    return (RUNTIME_LIB if where == "runtime" else BIN) / name


def package_tree(root: Path) -> list[str]:
    """A conda package's prefix: the files, a symlink, and info/ (conda's package format)."""
    listed = []
    for member, spec in FILES.items():
        target = root / member
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source(spec), target)
        listed.append(member)
    shutil.copyfile(BIN / "libplain.a", root / UNLISTED)
    (root / "lib" / "libcudart.so").symlink_to("libcudart.so.13")
    listed.append("lib/libcudart.so")
    info = root / "info"
    info.mkdir()
    index = {
        "name": NAME, "version": VERSION, "build": BUILD, "build_number": 0,
        "subdir": "linux-64", "platform": "linux", "arch": "x86_64", "depends": [],
    }  # fmt: skip
    (info / "index.json").write_text(json.dumps(index))
    paths: list[dict[str, object]] = []
    for p in sorted(listed):
        if (root / p).is_symlink():
            paths.append({"_path": p, "path_type": "softlink"})
            continue
        digest = hashlib.sha256((root / p).read_bytes()).hexdigest()
        size = (root / p).stat().st_size
        paths.append({"_path": p, "path_type": "hardlink", "sha256": digest, "size_in_bytes": size})
    (info / "paths.json").write_text(json.dumps({"paths": paths, "paths_version": 1}))
    (info / "files").write_text("\n".join(sorted(listed)) + "\n")
    return sorted([*listed, UNLISTED, "info/index.json", "info/paths.json", "info/files"])


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same tree as .conda and as .tar.bz2, made by conda-package-handling."""
    root = tmp_path_factory.mktemp("prefix")
    files = package_tree(root)
    out = tmp_path_factory.mktemp("packages")
    made = {}
    for suffix in (".conda", ".tar.bz2"):
        name = f"{NAME}-{VERSION}-{BUILD}{suffix}"
        cph_api.create(str(root), files, name, out_folder=str(out))
        made[suffix] = out / name
    return made


@pytest.mark.parametrize("suffix", [".conda", ".tar.bz2"])
def test_identity_ownership_and_members_read_like_the_files(
    packages: dict[str, Path], suffix: str
) -> None:
    path = packages[suffix]
    contents = read_conda(str(path))
    assert contents.problems == []
    [dist] = contents.distributions
    assert (dist.name, dist.version) == (NAME, VERSION)  # from info/index.json
    members = {b.path[len(str(path)) + 1 :]: b for b in contents.binaries}
    # every native member, the symlink (not a file) left out; the unlisted one is unowned
    assert sorted(members) == sorted([*FILES, UNLISTED])
    assert contents.unowned == [f"{path}/{UNLISTED}"]
    assert sorted(dist.native_files) == sorted(f"{path}/{m}" for m in FILES)
    for member, spec in FILES.items():
        facts = read_binary(str(source(spec)), deep=True)
        got = members[member]
        assert (got.format, got.size, got.machine, got.entries, got.error) == (
            facts.format, facts.size, facts.machine, facts.entries, facts.error
        ), member  # fmt: skip
        if spec.startswith("bin:lib"):  # what cuobjdump lists in the same bytes
            listed = our_names(got, "sass") + our_names(got, "ptx")
            assert listed == cuobjdump_names(source(spec), "--list-elf") + cuobjdump_names(
                source(spec), "--list-ptx"
            ), member


def test_both_formats_are_judged_alike_and_by_the_rules(packages: dict[str, Path]) -> None:
    """What each library carries (build.sh; cuobjdump agrees above), and the rules:
    - libmix.so: SASS sm_75/90/90a/100a/103f/120/120a, PTX compute_75/100f/120a;
    - libhidden.so: in .rodata (read because archives are read --deep) SASS sm_86, sm_110f, a bare
      sm_89 cubin, PTX compute_89 -- but it imports no CUDA module loader and neither needs nor
      dlopens libcuda (`nm -D`: no CUDA symbol; `readelf -d`: no NEEDED), so nothing can ever
      load them: no device code library;
    - k_sm90a.cubin: SASS sm_90a only (arch-specific: runs on exactly 9.0);
    - libcudadevrt.a: a device-link archive, never loaded at run time: not counted.
    12.0: libmix runs sm_120; the cubin has nothing -> partial (1 of 2).
    9.0: libmix sm_90, the cubin sm_90a -> native in both.
    8.0: libmix JITs compute_75 (no SASS of major 8), the cubin is 9.0 only -> partial.
    7.0: nothing in either -> none."""
    gpus = ["12.0", "9.0", "8.0", "7.0"]
    rows = {}
    for suffix, path in packages.items():
        report = scan_archives([str(path)], gpus=gpus)
        rows[suffix] = {
            p.gpu: (p.verdict, p.reason.split(";")[0]) for p in report.packages if p.package == NAME
        }
    assert rows[".conda"] == rows[".tar.bz2"]
    assert rows[".conda"] == {
        "12.0": ("partial", "1 of 2 libraries have nothing for 12.0: k_sm90a.cubin"),
        "9.0": ("native", "SASS for 9.0 in every library (2)"),
        "8.0": ("partial", "1 of 2 libraries have nothing for 8.0: k_sm90a.cubin"),
        "7.0": ("none", "no library has kernels for 7.0: k_sm90a.cubin, libmix.so"),
    }


def test_kernels_and_scan_cli_on_conda_packages(packages: dict[str, Path]) -> None:
    conda = packages[".conda"]
    listed = run_cli("kernels", str(conda), "--json")
    assert listed.returncode == 0, listed.stderr
    doc = json_output(listed, "kernels")
    assert sorted(f["path"] for f in doc["files"]) == sorted(
        f"{conda}/{m}" for m in [*FILES, UNLISTED]
    )
    scanned = run_cli("scan", str(packages[".tar.bz2"].parent), "--gpu", "12.0", "--json")
    assert scanned.returncode == 0, scanned.stderr
    doc = json_output(scanned, "scan")
    verdicts = {(p["package"], p["gpu"]): p["verdict"] for p in doc["packages"]}
    # the directory's two packages are one name; libextra.so, which no paths.json lists, is a
    # static archive (device-link: not loaded at run time). partial is no gap: exit 0 above.
    assert verdicts == {(NAME, "12.0"): "partial", ("(no distribution)", "12.0"): "no-kernels"}
    assert len(doc["python"]["site_packages"]) == 2


def test_corrupt_and_foreign_packages_are_reasons(
    packages: dict[str, Path], tmp_path: Path
) -> None:
    cut_conda = tmp_path / "cut-1.0-0.conda"
    cut_conda.write_bytes(packages[".conda"].read_bytes()[:4096])
    cut_bz2 = tmp_path / "cut-1.0-0.tar.bz2"
    data = packages[".tar.bz2"].read_bytes()
    cut_bz2.write_bytes(data[:-1000])  # inside bzip2's last 900 kB block: info/ comes before
    foreign = tmp_path / "foreign-1.0-0.tar.bz2"  # a bz2 tar, but not a conda package
    shutil.make_archive(str(tmp_path / "foreign-1.0-0"), "bztar", BIN.parent, "k.cu")
    empty = tmp_path / "empty-1.0-0.conda"
    with zipfile.ZipFile(empty, "w") as zf:
        zf.writestr("metadata.json", '{"conda_pkg_format_version": 2}')
    reasons = {}
    for path in (cut_conda, foreign, empty):
        contents = read_conda(str(path))
        assert contents.distributions == [] and contents.binaries == [], path
        reasons[path.name] = " ".join(p.reason for p in contents.problems)
    assert "not a readable conda package: File is not a zip file" in reasons[cut_conda.name]
    assert "no readable info/index.json: not a conda package" in reasons[foreign.name]
    assert "no info-*.tar.zst: not a .conda package" in reasons[empty.name]
    # cut near the end: what came before the cut is read (info/ comes first in the stream, as
    # conda-package-handling writes it), the member the cut falls in is an unreadable row, and
    # the package has a problem
    contents = read_conda(str(cut_bz2))
    assert [d.name for d in contents.distributions] == [NAME]
    assert "Compressed file ended before the end-of-stream marker" in contents.problems[0].reason
    unreadable = [b for b in contents.binaries if b.format == "unreadable"]
    assert len(unreadable) == 1 and "corrupt member" in (unreadable[0].error or "")
    result = run_cli("scan", str(cut_conda))
    assert result.returncode == 2 and "not a readable conda package" in result.stderr
    assert "Traceback" not in result.stderr
    listed = run_cli("kernels", str(cut_bz2))
    assert listed.returncode == 2 and "Traceback" not in listed.stderr


def read_without_zstandard(path: str) -> tuple[list[str], int]:
    import sys

    sys.modules["zstandard"] = None  # type: ignore[assignment]  # import zstandard fails
    contents = read_conda(path)
    return [p.reason for p in contents.problems], len(contents.distributions)


def test_without_zstandard_a_conda_file_is_a_reason(packages: dict[str, Path]) -> None:
    reasons, dists = in_child(read_without_zstandard, str(packages[".conda"]))
    assert dists == 0
    assert any("needs the zstandard module" in r for r in reasons)
    reasons, dists = in_child(read_without_zstandard, str(packages[".tar.bz2"]))
    assert (reasons, dists) == ([], 1)  # bz2 is in the standard library


def test_nothing_is_written_next_to_the_package(packages: dict[str, Path], tmp_path: Path) -> None:
    for path in packages.values():
        shutil.copy(path, tmp_path / path.name)
    before = sorted(p.name for p in tmp_path.iterdir())
    for path in packages.values():
        read_conda(str(tmp_path / path.name))
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_urls_of_conda_packages_read_like_the_files(
    packages: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """file: URLs, and http:// from Python's http.server (no range support: downloaded once into
    the cache, then read): the same members and entries as the local files."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    for path in packages.values():
        shutil.copy(path, tmp_path / path.name)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for suffix, path in packages.items():
            local = read_conda(str(path))
            http_url = f"http://127.0.0.1:{server.server_address[1]}/{path.name}"
            contents, fetched = read_targets([path.as_uri(), http_url])
            assert [f.ranged for f in fetched] == [False, False]
            for read in contents:
                assert read.problems == [], suffix
                assert [d.name for d in read.distributions] == [NAME]
                assert [(b.path[len(read.label) :], b.entries) for b in read.binaries] == [
                    (b.path[len(str(path)) :], b.entries) for b in local.binaries
                ]
    finally:
        server.shutdown()
        server.server_close()
