"""`archgap versions`: which released version of a package covers a GPU, from a real index on
loopback (nginx with range requests; Python's http.server without).

The project demo-kernels is packaged from the fixture libraries nvcc built
(tests/fixtures/cuda/build.sh); what each holds is what its nvcc line asks for, and what cuobjdump
lists for it:

- libmix.so: SASS sm_75, sm_90, sm_90a, sm_100a, sm_103f, sm_120, sm_120a; PTX compute_75,
  compute_100f, compute_120a
- libptxonly.so: PTX compute_80 only
- libcomp_default.so: SASS sm_80, sm_120a; PTX compute_90
- libdebug.so: SASS sm_80 only

NVIDIA's rules: SASS sm_XY runs on compute capability X.Z with Z >= Y (same major); sm_XYa only on
X.Y itself; PTX compute_XY is compiled by the driver for any GPU of compute capability >= X.Y.

main index (PEP 503 HTML / PEP 691 JSON): 1.0 = libmix, 2.0 = libptxonly, 3.0 = libcomp_default,
a pre-release 3.9rc1 = libmix (pip takes it only when asked), plus files pip must not choose for
Python 3.12 on manylinux_2_28_x86_64 (a yanked 4.0, a macOS-only 3.5, a 3.1 that needs Python >=
3.13, an sdist); extra index ("cu130"): 3.0+cu130 = libdebug, 3.0+cpu without any native file (a
CPU build) and another 2.0 = libmix (the same version as main's, other bytes).
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import CUDA_BIN, DATA, json_output, run_cli
from tests.loopback_index import NGINX, Listing, make_wheel, nginx_server, write_index
from tests.toolkit_stubs import banner_toolkit

CURAND = next(iter((DATA / "wheels").glob("nvidia_curand-10.4.0.35-*.whl")), None)
FLASHINFER = next(iter((DATA / "wheels-jit").glob("flashinfer_python-0.6.6-*.whl")), None)
TARGET = ("--python-version", "3.12", "--platform", "manylinux_2_28_x86_64")
ENV = {"PIP_INDEX_URL": "", "PIP_EXTRA_INDEX_URL": "", "UV_INDEX_URL": "",
       "PIP_CONFIG_FILE": "/dev/null"}  # fmt: skip

pytestmark = pytest.mark.skipif(NGINX is None, reason="scripts/services installs nginx-light")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """(main index URL, extra index URL, nginx's access log)."""
    root = tmp_path_factory.mktemp("versions")
    wheels = root / "build"
    main, extra = wheels / "main", wheels / "extra"
    main.mkdir(parents=True)
    extra.mkdir(parents=True)

    def demo(where: Path, version: str, lib: str | None) -> Listing:
        members = {f"demo/{lib}": CUDA_BIN / lib} if lib else {}
        return Listing(make_wheel(where, "demo-kernels", version, members))

    decoys = [
        Listing(main / "demo_kernels-4.0-py3-none-manylinux_2_17_x86_64.whl", {"data-yanked": ""}),
        Listing(main / "demo_kernels-3.5-py3-none-macosx_11_0_arm64.whl"),
        Listing(
            main / "demo_kernels-3.1-py3-none-manylinux_2_17_x86_64.whl",
            {"data-requires-python": ">=3.13"},
        ),
        Listing(main / "demo_kernels-3.2.tar.gz"),
    ]
    broken = main / "broken_pkg-1.0-py3-none-any.whl"
    broken.write_bytes((CUDA_BIN / "libmix.so").read_bytes()[:5000])
    projects = {
        "demo-kernels": [
            demo(main, "1.0", "libmix.so"),
            demo(main, "2.0", "libptxonly.so"),
            demo(main, "3.0", "libcomp_default.so"),
            demo(main, "3.9rc1", "libmix.so"),
            *decoys,
        ],
        "broken-pkg": [Listing(broken)],
    }
    if CURAND is not None:
        projects["nvidia-curand"] = [Listing(CURAND)]
    if FLASHINFER is not None:
        projects["flashinfer-python"] = [Listing(FLASHINFER)]
    extras = {
        "demo-kernels": [
            demo(extra, "3.0+cu130", "libdebug.so"),
            demo(extra, "3.0+cpu", None),
            demo(extra, "2.0", "libmix.so"),
        ]
    }
    for kind in ("simple", "json"):
        write_index(root / "srv", "main", projects, kind)
        write_index(root / "srv", "cu130", extras, kind)
    prefix = root / "nginx"
    prefix.mkdir()
    with nginx_server(root / "srv", prefix) as url:
        yield f"{url}/main/simple", f"{url}/cu130/json", prefix / "access.log"


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test reads the wheels itself: what an earlier one read is not in its cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def versions(*args: str) -> tuple[int, dict[str, object]]:
    result = run_cli("versions", *args, *TARGET, "--json", env=ENV)
    assert "Traceback" not in result.stderr
    return result.returncode, json_output(result, "versions")


def rows(doc: dict[str, object]) -> list[tuple[str, str, list[str], bool]]:
    """(version, index, verdicts per GPU, covers) of each variant judged, in order."""
    found = doc["versions"]
    assert isinstance(found, list)
    return [
        (v["version"], v["index"].rsplit("/", 2)[-2], [g["verdict"] for g in v["verdicts"]],
         v["covers"])
        for v in found
    ]  # fmt: skip


def test_every_variant_newest_first_on_a_t4(served: tuple[str, str, Path]) -> None:
    """T4 (7.5): only libmix has code for it (sm_75 SASS). 3.0+cu130 (sm_80 SASS), 3.0 (sm_80,
    sm_120a, PTX 9.0) and main's 2.0 (PTX 8.0) have nothing a 7.5 can load; the extra index's
    2.0 and 1.0 do; 3.0+cpu has no device code at all, which covers no GPU. Local labels sort
    above 3.0 (cu130 above cpu); main's 2.0 before the extra's (index order); 3.9rc1 is a
    pre-release, left out as pip leaves it out.
    The newest that covers it is the extra index's 2.0; main has a 2.0 too, with other bytes, so
    only the wheel's URL installs exactly that one."""
    main, extra, _ = served
    code, doc = versions("demo-kernels", "--gpu", "7.5", "--index-url", main,
                         "--extra-index-url", extra)  # fmt: skip
    assert code == 0
    assert rows(doc) == [
        ("3.0+cu130", "cu130", ["none"], False),
        ("3.0+cpu", "cu130", ["no-kernels"], False),
        ("3.0", "main", ["none"], False),
        ("2.0", "main", ["none"], False),
        ("2.0", "cu130", ["native"], True),
        ("1.0", "main", ["native"], True),
    ]
    assert doc["listed"] == 6 and doc["judged"] == 6
    winner = doc["winner"]
    assert isinstance(winner, dict)
    assert (winner["version"], winner["index"]) == ("2.0", extra)
    assert doc["install"] == f"pip install 'demo-kernels @ {winner['url']}'"
    assert winner["url"].startswith(extra.rsplit("/", 2)[0] + "/cu130/files/")


def test_first_stops_and_fetches_no_older_wheel(served: tuple[str, str, Path]) -> None:
    main, extra, log = served
    before = log.read_text()
    code, doc = versions("demo-kernels", "--gpu", "7.5", "--first", "--index-url", main,
                         "--extra-index-url", extra)  # fmt: skip
    assert code == 0
    assert [r[0] for r in rows(doc)] == ["3.0+cu130", "3.0+cpu", "3.0", "2.0", "2.0"]
    assert doc["listed"] == 6 and doc["first"] is True
    asked = log.read_text()[len(before) :]
    assert "demo_kernels-2.0-" in asked and "demo_kernels-1.0-" not in asked


def test_pip_line_pins_the_variant(served: tuple[str, str, Path]) -> None:
    """A100 (8.0): 3.0+cu130 has sm_80 SASS: the first variant covers it, from the extra index.
    RTX PRO 6000 (12.0): 3.0+cu130 (sm_80 only) and 3.0+cpu have nothing for it; 3.0 has
    sm_120a. `==3.0` would also match 3.0+cu130 (and pip takes the highest), so the pin is
    `===3.0`. A specifier that names a pre-release lets 3.9rc1 in (libmix: sm_75 for a T4)."""
    main, extra, _ = served
    indexes = ("--index-url", main, "--extra-index-url", extra)
    code, doc = versions("demo-kernels", "--gpu", "A100", "--first", *indexes)
    assert code == 0 and rows(doc) == [("3.0+cu130", "cu130", ["native"], True)]
    assert doc["install"] == f"pip install --extra-index-url {extra} demo-kernels==3.0+cu130"
    code, doc = versions("demo-kernels", "--gpu", "12.0", "--first", *indexes)
    assert code == 0
    assert rows(doc) == [
        ("3.0+cu130", "cu130", ["none"], False),
        ("3.0+cpu", "cu130", ["no-kernels"], False),
        ("3.0", "main", ["native"], True),
    ]
    assert doc["install"] == f"pip install --index-url {main} demo-kernels===3.0"
    code, doc = versions("demo-kernels>=3.9rc1", "--gpu", "T4", "--first", *indexes)
    assert code == 0 and rows(doc) == [("3.9rc1", "main", ["native"], True)]
    assert doc["install"] == f"pip install --index-url {main} demo-kernels==3.9rc1"


def test_every_gpu_must_be_covered_and_none_is_exit_1(served: tuple[str, str, Path]) -> None:
    """7.5 and 12.0 together, main only: 3.0 has nothing for 7.5, 2.0 (PTX 8.0) neither; 1.0
    (libmix) has sm_75 and sm_120 SASS. V100 (7.0): sm_75 SASS needs minor >= 5 and PTX 7.5 a
    7.5 GPU: no variant runs, exit 1."""
    main, _, _ = served
    code, doc = versions("demo-kernels", "--gpu", "7.5,12.0", "--first", "--index-url", main)
    assert code == 0
    assert rows(doc) == [
        ("3.0", "main", ["none", "native"], False),
        ("2.0", "main", ["none", "jit"], False),
        ("1.0", "main", ["native", "native"], True),
    ]
    assert doc["install"] == f"pip install --index-url {main} demo-kernels==1.0"
    gone = main.replace("/main/", "/gone/")  # an index without the project: skipped, said
    code, doc = versions("demo-kernels", "--gpu", "7.0", "--index-url", main,
                         "--extra-index-url", gone)  # fmt: skip
    assert doc["index_problems"] == [f"{gone}/demo-kernels/: HTTP 404 Not Found"]
    assert code == 1 and doc["winner"] is None and doc["install"] is None
    assert {r[2][0] for r in rows(doc)} == {"none"} and doc["judged"] == 3


def test_an_unreadable_variant_is_a_problem_and_the_walk_goes_on(
    served: tuple[str, str, Path],
) -> None:
    """For Python 3.13 the 3.1 wheel is pip's newest choice; the index lists it but serves
    nothing (404): a problem on that row, and 3.0 is judged next."""
    main, _, _ = served
    result = run_cli("versions", "demo-kernels", "--gpu", "12.0", "--first", "--index-url", main,
                     "--python-version", "3.13", "--platform", "manylinux_2_28_x86_64", "--json",
                     env=ENV)  # fmt: skip
    doc = json_output(result, "versions")
    assert result.returncode == 0, result.stderr
    first, second = doc["versions"]
    assert first["version"] == "3.1" and "HTTP 404" in first["problem"]
    assert first["covers"] is False and first["verdicts"] == []
    assert (second["version"], second["covers"]) == ("3.0", True)


def test_python_api_is_the_same_walk(
    served: tuple[str, str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """api.versions: the T4 walk over the main index (3.0 and 2.0 have nothing for 7.5)."""
    from archgap.api import versions as api_versions
    from archgap.index.options import IndexOptions

    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    main, _, _ = served
    options = IndexOptions(main, (), "3.12", "manylinux_2_28_x86_64")
    report = api_versions("demo-kernels", gpus=["T4"], options=options, first=True)
    assert [(v.version, v.covers) for v in report.versions] == [
        ("3.0", False),
        ("2.0", False),
        ("1.0", True),
    ]
    assert report.install == f"pip install --index-url {main} demo-kernels==1.0"


def test_nothing_judged_is_exit_2(served: tuple[str, str, Path]) -> None:
    main, _, _ = served
    code, doc = versions("no-such-project", "--gpu", "12.0", "--index-url", main)
    assert code == 2 and "HTTP 404" in str(doc["problem"]) and doc["versions"] == []
    code, doc = versions("broken-pkg", "--gpu", "12.0", "--index-url", main)
    assert code == 2 and doc["judged"] == 0
    assert "not a readable wheel" in json.dumps(doc["versions"])
    bad = run_cli("versions", "demo-kernels", "--gpu", "no-such-gpu", "--index-url", main, env=ENV)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_markdown_and_csv(served: tuple[str, str, Path]) -> None:
    """The same rows as a Markdown table (GPU and compute capability in the header) and CSV."""
    main, _, _ = served
    args = ("versions", "demo-kernels", "--gpu", "T4", "--index-url", main, *TARGET)
    markdown = run_cli(*args, "--format", "markdown", env=ENV)
    assert markdown.returncode == 0, markdown.stderr
    assert "| version | index | T4 (7.5) | covers | wheel |" in markdown.stdout
    assert "| 1.0 | main | native | yes | `demo_kernels-1.0-" in markdown.stdout
    assert f"$ pip install --index-url {main} demo-kernels==1.0" in markdown.stdout
    csv = run_cli(*args, "--format", "csv", env=ENV)
    assert csv.stdout.splitlines()[1:] == [
        "3.0,main,none,no,demo_kernels-3.0-py3-none-manylinux_2_17_x86_64.whl",
        "2.0,main,none,no,demo_kernels-2.0-py3-none-manylinux_2_17_x86_64.whl",
        "1.0,main,native,yes,demo_kernels-1.0-py3-none-manylinux_2_17_x86_64.whl",
    ]


@pytest.mark.skipif(CURAND is None, reason="scripts/testdata downloads the wheels")
def test_real_wheel(served: tuple[str, str, Path]) -> None:
    """nvidia-curand 10.4.0.35 from PyPI: libcurand.so.10 holds SASS sm_75 .. sm_121 and PTX
    compute_121 only (cuobjdump): native on 12.0, nothing for a V100 (7.0)."""
    main, _, _ = served
    args = ("versions", "nvidia-curand", "--gpu", "V100,12.0", "--index-url", main, *TARGET)
    text = run_cli(*args, env=ENV)
    assert text.returncode == 1, text.stderr
    lines = text.stdout.splitlines()
    row = next(line for line in lines if line.startswith("10.4.0.35"))
    assert row.split()[:5] == ["10.4.0.35", "main", "none", "native", "no"]
    assert "No released variant of nvidia-curand covers V100 (7.0), 12.0 (12.0)" in text.stdout


@pytest.mark.skipif(FLASHINFER is None, reason="scripts/testdata downloads the wheel")
def test_a_jit_package_is_judged_by_its_jit_model_and_a_rerun_reads_from_the_cache(
    served: tuple[str, str, Path], tmp_path: Path
) -> None:
    """flashinfer-python 0.6.6 from PyPI is a py3-none-any wheel with no native member: it
    compiles its kernels at first use. Its rules (0.6.6 flashinfer/compilation_context.py: a GPU
    of major >= 9 gets an 'a' target; flashinfer/jit/core.py check_cuda_arch, lines 96-108:
    sm75 or higher) build compute_120a for an RTX PRO 6000 (12.0), which nvcc has from CUDA
    12.8 on (CUDA 12.8 release notes): covered, by JIT with the nvcc here (a CUDA 12.8 stand-in
    named by CUDA_HOME). A V100 (7.0) is below sm75: rejected."""
    assert FLASHINFER is not None
    env = {**ENV, "CUDA_HOME": str(banner_toolkit(tmp_path, "12.8"))}
    with zipfile.ZipFile(FLASHINFER) as zf:
        assert not [n for n in zf.namelist() if n.endswith((".so", ".cubin", ".a"))]
    main, _, log = served
    args = ("flashinfer-python", "--gpu", "RTX PRO 6000", "--index-url", main)
    before = log.read_text()
    text = run_cli("versions", *args, *TARGET, env=env)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    # the verdict is printed as it is decided (into this pipe), before the report's table
    decided = lines.index("- 0.6.6 (main): RTX PRO 6000 jit: covers")
    assert decided < next(i for i, line in enumerate(lines) if line.startswith("Versions of"))
    assert any(
        line.strip().startswith("$ pip install") and line.endswith(" flashinfer-python==0.6.6")
        for line in lines
    )
    fetched = re.search(r"([\d,]+) bytes fetched", text.stdout)
    assert fetched and int(fetched.group(1).replace(",", "")) > 0
    assert "flashinfer_python-0.6.6-" in log.read_text()[len(before) :]
    # the rerun: the wheel's contents come from the cache, named by the index's sha256
    before = log.read_text()
    rerun = run_cli("versions", *args, "--gpu", "V100", *TARGET, "--json", env=env)
    code, doc = rerun.returncode, json_output(rerun, "versions")
    asked = log.read_text()[len(before) :]
    assert "flashinfer_python-0.6.6-" not in asked  # only the project page was asked for
    assert doc["bytes_fetched"] == 0
    assert code == 1 and rows(doc) == [("0.6.6", "main", ["jit", "none"], False)]
    found = doc["versions"]
    assert isinstance(found, list)
    assert "check_cuda_arch() rejects it whatever the toolkit" in found[0]["verdicts"][1]["reason"]
