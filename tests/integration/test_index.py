"""Requirements and wheel URLs from a real package index on loopback.

The index is a PEP 503 tree (HTML pages with sha256 fragments and data-* attributes) and a PEP
691 tree (JSON) over the real wheels of tests/.data/wheels, served twice: by Python's
http.server, which does not answer range requests (the wheel is downloaded once into the cache),
and by nginx (Debian's nginx-light, installed by scripts/services), which does (only the zip's
central directory and native members cross the wire).
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from archgap.api import scan_archives
from archgap.index.options import IndexOptions
from archgap.index.resolve import ResolveError, indexes, resolve
from archgap.targets import read_targets
from tests.helpers import DATA, in_child, json_output, run_cli
from tests.loopback_index import NGINX, CountingHandler, nginx_server, sha256
from tests.loopback_index import plain_server as serve_plain

WHEELS = DATA / "wheels"
CURAND = next(iter(WHEELS.glob("nvidia_curand-10.4.0.35-*.whl")), None)
RUNTIME = next(iter(WHEELS.glob("nvidia_cuda_runtime-13.0.96-*.whl")), None)

pytestmark = pytest.mark.skipif(
    CURAND is None or RUNTIME is None, reason="scripts/testdata downloads the wheels"
)

# Files the index lists that pip must not choose for Python 3.12 on manylinux_2_28_x86_64: a newer
# macOS-only wheel, a newer yanked one, a newer one that requires Python >= 3.13, an sdist.
DECOYS = [
    ("nvidia_curand-10.9.0-py3-none-macosx_11_0_arm64.whl", {}),
    ("nvidia_curand-10.8.0-py3-none-manylinux_2_27_x86_64.whl", {"data-yanked": ""}),
    ("nvidia_curand-10.7.0-py3-none-manylinux_2_27_x86_64.whl", {"data-requires-python": ">=3.13"}),
    ("nvidia_curand-10.6.0.tar.gz", {}),
]
TARGET = IndexOptions(python_version="3.12", platform="manylinux_2_28_x86_64")


def build_index(root: Path) -> None:
    """simple/ (PEP 503 HTML) and json/ (PEP 691) for both projects; files/ holds the wheels
    (links to tests/.data) and a truncated copy of the runtime wheel as a broken project."""
    files = root / "files"
    files.mkdir(parents=True)
    assert CURAND is not None and RUNTIME is not None
    for wheel in (CURAND, RUNTIME):
        (files / wheel.name).symlink_to(wheel)
    broken = files / "broken_pkg-1.0-py3-none-any.whl"
    with RUNTIME.open("rb") as whole:
        broken.write_bytes(whole.read(100_000))
    projects: dict[str, list[tuple[str, dict[str, str], str | None]]] = {
        "nvidia-curand": [(CURAND.name, {}, sha256(CURAND))]
        + [(name, attrs, None) for name, attrs in DECOYS],
        "nvidia-cuda-runtime": [(RUNTIME.name, {"data-requires-python": ">=3"}, sha256(RUNTIME))],
        "broken-pkg": [(broken.name, {}, sha256(broken))],
    }
    for project, entries in projects.items():
        html = ["<!DOCTYPE html><html><body>"]
        listed = []
        for name, attrs, digest in entries:
            fragment = f"#sha256={digest}" if digest else ""
            extra = "".join(f' {k}="{v}"' if v else f" {k}" for k, v in attrs.items())
            html.append(f'<a href="../../files/{name}{fragment}"{extra}>{name}</a>')
            listed.append(
                {
                    "filename": name,
                    "url": f"../../files/{name}",
                    "hashes": {"sha256": digest} if digest else {},
                    "requires-python": attrs.get("data-requires-python"),
                    "yanked": "data-yanked" in attrs,
                }
            )
        page = root / "simple" / project
        page.mkdir(parents=True)
        (page / "index.html").write_text("\n".join(html) + "</body></html>\n")
        page = root / "json" / project
        page.mkdir(parents=True)
        doc = {"meta": {"api-version": "1.0"}, "name": project, "files": listed}
        (page / "index.json").write_text(json.dumps(doc))


@pytest.fixture(scope="module")
def index_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("index")
    build_index(root)
    return root


@pytest.fixture(scope="module")
def plain_server(index_root: Path) -> Iterator[str]:
    """Python's http.server: no range support (it ignores Range and answers 200)."""
    with serve_plain(index_root) as url:
        yield url


@pytest.fixture(scope="module")
def nginx(index_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """nginx serving the same tree, with range support (its default for static files)."""
    if NGINX is None:
        pytest.skip("scripts/services installs nginx-light")
    with nginx_server(index_root, tmp_path_factory.mktemp("nginx")) as url:
        yield url


@pytest.fixture(autouse=True)
def clean_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No pip configuration of this machine, and a cache of the test's own."""
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "UV_INDEX_URL", "PIP_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")


def test_resolution_is_pips_choice_from_html_and_json(plain_server: str, nginx: str) -> None:
    """10.9 is macOS-only, 10.8 yanked, 10.7 needs Python >= 3.13 and 10.6 is an sdist:
    for Python 3.12 on manylinux_2_28_x86_64 pip installs 10.4.0.35."""
    assert CURAND is not None
    for index in (f"{plain_server}/simple", f"{nginx}/json"):
        chosen = resolve("nvidia-curand>=10", [index], "3.12", "manylinux_2_28_x86_64")
        assert (chosen.version, chosen.file.filename) == ("10.4.0.35", CURAND.name)
        assert chosen.file.sha256 == sha256(CURAND)
    with pytest.raises(ResolveError, match=r"no wheel for Python 3\.12 on macosx_11_0_x86_64"):
        resolve("nvidia-curand", [f"{nginx}/json"], "3.12", "macosx_11_0_x86_64")
    # on an arm64 Mac the 10.9 wheel is the one
    mac = resolve("nvidia-curand", [f"{nginx}/json"], "3.12", "macosx_11_0_arm64")
    assert mac.version == "10.9.0"


def test_plain_server_downloads_once_into_the_cache(plain_server: str, tmp_path: Path) -> None:
    options = IndexOptions(f"{plain_server}/simple", (), "3.12", "manylinux_2_28_x86_64")
    CountingHandler.requests.clear()
    contents, fetched = read_targets(["nvidia-cuda-runtime==13.0.96"], options)
    assert RUNTIME is not None
    assert [f.ranged for f in fetched] == [False]
    assert fetched[0].bytes_fetched == RUNTIME.stat().st_size
    cached = Path(fetched[0].cached or "")
    assert cached.parent == tmp_path / "cache" / "archgap" / "wheels"
    assert sha256(cached) == sha256(RUNTIME)
    assert contents[0].distributions[0].name == "nvidia-cuda-runtime"
    downloads = [r for r in CountingHandler.requests if r.endswith(".whl")]
    read_targets(["nvidia-cuda-runtime==13.0.96"], options)  # the second time: from the cache
    assert [r for r in CountingHandler.requests if r.endswith(".whl")] == downloads


def test_nginx_sends_only_the_directory_and_native_members(nginx: str) -> None:
    """Range requests: what crosses the wire is at least the native members' compressed bytes
    and less than the wheel; nothing is cached."""
    assert RUNTIME is not None
    with zipfile.ZipFile(RUNTIME) as zf:
        native = sum(i.compress_size for i in zf.infolist() if ".so" in i.filename or
                     i.filename.endswith(".a"))  # fmt: skip
    options = IndexOptions(f"{nginx}/simple", (), "3.12", "manylinux_2_28_x86_64")
    contents, fetched = read_targets(["nvidia-cuda-runtime==13.0.96"], options)
    [how] = fetched
    assert how.ranged and how.cached is None
    assert native <= how.bytes_fetched < RUNTIME.stat().st_size
    from_file, _ = read_targets([str(RUNTIME)])
    assert [b.entries for b in contents[0].binaries] == [b.entries for b in from_file[0].binaries]


Row = tuple[str, str, str, str]


def three_ways(nginx: str, plain_server: str) -> list[set[Row]]:
    """The verdict rows of libcurand's wheel as a file, a requirement and a URL."""
    assert CURAND is not None
    gpus = ["12.0", "9.0", "7.0"]
    options = IndexOptions(f"{nginx}/simple", (), "3.12", "manylinux_2_28_x86_64")
    reports = [
        scan_archives([str(CURAND)], gpus=gpus),
        scan_archives(["nvidia-curand==10.4.0.35"], gpus=gpus, options=options),
        scan_archives([f"{plain_server}/files/{CURAND.name}"], gpus=gpus),
    ]
    return [{(p.package, p.version, p.gpu, p.verdict) for p in r.packages} for r in reports]


def test_requirement_url_and_file_give_the_same_verdicts(
    nginx: str, plain_server: str, tmp_path: Path
) -> None:
    by_file, by_requirement, by_url = in_child(three_ways, nginx, plain_server)
    assert by_file == by_requirement == by_url
    # libcurand.so.10: SASS sm_75..sm_121 (no sm_70), PTX only compute_121 (cuobjdump)
    assert ("nvidia-curand", "10.4.0.35", "7.0", "none") in by_file


def test_bad_input_is_a_reason(nginx: str) -> None:
    index = ["--index-url", f"{nginx}/simple", "--python-version", "3.12",
             "--platform", "manylinux_2_28_x86_64"]  # fmt: skip
    missing = run_cli("scan", "no-such-project==1.0", *index)
    assert missing.returncode == 2
    assert "HTTP 404" in missing.stderr and "Traceback" not in missing.stderr
    broken = run_cli("scan", "broken-pkg", *index)
    assert broken.returncode == 2
    assert "not a readable wheel" in broken.stderr and "Traceback" not in broken.stderr
    # one target judged, one not: the report, with the other as a problem, exit by the verdicts
    mixed = run_cli("scan", "nvidia-cuda-runtime==13.0.96", "no-such-project", *index, "--json")
    assert mixed.returncode == 0, mixed.stderr
    doc = json_output(mixed, "scan")
    # nginx answers ranges: only the directory and native members came, so the index's
    # sha256 could not be checked, and the wheel says so
    problems = {p["subject"]: p["reason"] for p in doc["problems"]}
    assert problems.pop("no-such-project").startswith("no wheel")
    [(wheel, reason)] = problems.items()
    assert wheel.endswith(".whl") and reason.startswith("unverified:")
    assert {p["package"] for p in doc["packages"]} == {"nvidia-cuda-runtime"}


def test_indexes_follow_pip_and_uv_settings(tmp_path: Path) -> None:
    config = tmp_path / "pip.conf"
    config.write_text("[global]\nextra-index-url = http://a.example/simple http://b.example/s\n")
    env = {"PIP_CONFIG_FILE": str(config), "UV_INDEX_URL": "http://uv.example/simple",
           "PIP_EXTRA_INDEX_URL": "http://c.example/simple", "HOME": str(tmp_path)}  # fmt: skip
    assert indexes(None, ["http://x.example/simple"], env) == [
        "http://uv.example/simple",
        "http://x.example/simple",
        "http://c.example/simple",
        "http://a.example/simple",
        "http://b.example/s",
    ]
    env["PIP_INDEX_URL"] = "http://pip.example/simple"
    assert indexes(None, [], env)[0] == "http://pip.example/simple"
    assert indexes("http://cli.example/simple", [], env)[0] == "http://cli.example/simple"
