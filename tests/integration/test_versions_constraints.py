"""`archgap versions --constraints FILE`: a constraints file that steers the real pip and the real
uv away from releases with nothing for the GPU, on a package index on loopback (nginx).

A constraints file is a requirements file whose lines only narrow the versions a resolver may
pick ("Constraints files are requirements files that only control which version of a requirement
is installed, not whether it is installed or not", pip's user guide, "Constraints Files",
https://pip.pypa.io/en/stable/user_guide/#constraints-files; uv pip compile/install
"-c, --constraints: Constrain versions using the given requirements files", uv's --help).
`NAME!=V` excludes V, and by PEP 440 ("Version exclusion": the matching rules of `==`,
inverted; a public version in the specifier ignores candidates' local labels)
`!=3.0` excludes 3.0+cu130 as well, while `!=3.0+cu130` excludes that local version alone.

The project demo-kernels is packaged from the fixture libraries nvcc built
(tests/fixtures/cuda/build.sh; what each holds is its nvcc line, and what cuobjdump lists):
- libmix.so: SASS sm_75, sm_90, sm_90a, sm_100a, sm_103f, sm_120, sm_120a; PTX compute_75,
  compute_100f, compute_120a
- libptxonly.so: PTX compute_80 only
- libcomp_default.so: SASS sm_80, sm_120a; PTX compute_90
- libdebug.so: SASS sm_80 only

NVIDIA's rules: SASS sm_XY runs on compute capability X.Z with Z >= Y (same major); sm_XYa only
on X.Y itself; PTX compute_XY is JIT-compiled by the driver for compute capability >= X.Y.

main index: 1.0 = libmix, 2.0 = libptxonly, 3.0 = libcomp_default; extra index ("cu130"):
3.0+cu130 = libdebug and 3.0+cpu with no native file.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import CUDA_BIN, run_cli
from tests.loopback_index import NGINX, Listing, make_wheel, nginx_server, write_index

UV = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
TARGET = ("--python-version", "3.12", "--platform", "manylinux_2_28_x86_64")
# neither the user's pip or uv configuration nor their indexes take part
CLEAN = {"PIP_INDEX_URL": "", "PIP_EXTRA_INDEX_URL": "", "PIP_CONFIG_FILE": "/dev/null",
         "UV_INDEX_URL": "", "UV_EXTRA_INDEX_URL": "", "UV_DEFAULT_INDEX": "", "UV_INDEX": "",
         "UV_NO_CONFIG": "1", "UV_PYTHON_DOWNLOADS": "never"}  # fmt: skip

pytestmark = [
    pytest.mark.skipif(NGINX is None, reason="scripts/services installs nginx-light"),
    pytest.mark.skipif(UV is None, reason="uv is a test dependency (pip install -e .[test])"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(main index URL, extra index URL)."""
    root = tmp_path_factory.mktemp("constraints")
    main, extra = root / "build" / "main", root / "build" / "extra"
    main.mkdir(parents=True)
    extra.mkdir(parents=True)

    def demo(where: Path, version: str, lib: str | None) -> Listing:
        members = {f"demo/{lib}": CUDA_BIN / lib} if lib else {}
        return Listing(make_wheel(where, "demo-kernels", version, members))

    projects = {
        "demo-kernels": [
            demo(main, "1.0", "libmix.so"),
            demo(main, "2.0", "libptxonly.so"),
            demo(main, "3.0", "libcomp_default.so"),
        ]
    }
    extras = {
        "demo-kernels": [demo(extra, "3.0+cu130", "libdebug.so"), demo(extra, "3.0+cpu", None)]
    }
    write_index(root / "srv", "main", projects, "simple")
    write_index(root / "srv", "cu130", extras, "simple")
    prefix = root / "nginx"
    prefix.mkdir()
    with nginx_server(root / "srv", prefix) as url:
        yield f"{url}/main/simple", f"{url}/cu130/simple"


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def constraints(tmp_path: Path, gpu: str, *indexes: str) -> tuple[int, list[str]]:
    """archgap's exit code and the constraints file it wrote: its lines that are not comments."""
    path = tmp_path / "constraints.txt"
    result = run_cli("versions", "demo-kernels", "--gpu", gpu, *indexes, *TARGET,
                     "--constraints", str(path), env=CLEAN)  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    text = path.read_text()
    return result.returncode, [line for line in text.splitlines() if not line.startswith("#")]


def pip_picks(tmp_path: Path, indexes: list[str], constraint: Path | None) -> str:
    """The file the real pip downloads for `demo-kernels` on CPython 3.12, manylinux_2_28 (the
    older manylinux_2_17 named too: pip 23 does not expand a --platform to the older glibc
    tags that PEP 600 says a manylinux_2_28 system accepts)."""
    dest = tmp_path / f"pip-{'c' if constraint else 'plain'}"
    command = [sys.executable, "-m", "pip", "download", "demo-kernels", "--no-deps",
               "--only-binary=:all:", "--no-cache-dir", "--disable-pip-version-check",
               "--python-version", "3.12", "--platform", "manylinux_2_28_x86_64",
               "--platform", "manylinux_2_17_x86_64", "-d", str(dest),
               *indexes, *(["-c", str(constraint)] if constraint else [])]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **CLEAN})
    assert done.returncode == 0, done.stderr
    (wheel,) = [p.name for p in dest.iterdir()]
    return wheel


def uv_picks(tmp_path: Path, indexes: list[str], constraint: Path | None) -> str:
    """The pin the real uv resolves for `demo-kernels` (uv pip compile) for the same target;
    with several indexes as pip does (--index-strategy unsafe-best-match: every index's
    versions, the highest wins)."""
    assert UV is not None
    wanted = tmp_path / "requirements.in"
    wanted.write_text("demo-kernels\n")
    command = [UV, "pip", "compile", str(wanted), "--no-header", "--no-annotate",
               "--python-version", "3.12", "--python-platform", "x86_64-manylinux_2_28",
               "--cache-dir", str(tmp_path / "uv-cache"), "--index-strategy", "unsafe-best-match",
               *indexes, *(["-c", str(constraint)] if constraint else [])]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **CLEAN})
    assert done.returncode == 0, done.stderr
    (pin,) = [line for line in done.stdout.splitlines() if line and not line.startswith("#")]
    return pin


def test_the_newest_release_without_the_t4s_code_is_excluded(
    served: tuple[str, str], tmp_path: Path
) -> None:
    """T4 (7.5) on main: 3.0 holds sm_80 and sm_120a SASS and compute_90 PTX (nothing a 7.5 can
    run: SASS needs major 7 and minor <= 5, PTX compute_90 needs >= 9.0), 2.0 only compute_80
    PTX (>= 8.0): both are excluded, with why; 1.0 (sm_75 SASS) is not. Without the file pip
    and uv take the newest, 3.0; with it, 1.0."""
    main, _ = served
    code, lines = constraints(tmp_path, "T4", "--index-url", main)
    assert code == 0
    assert [line.split("  #")[0] for line in lines] == ["demo-kernels!=3.0", "demo-kernels!=2.0"]
    assert re.search(r"demo_kernels-3\.0-\S+\.whl: T4 \(7\.5\) none: ", lines[0]), lines[0]
    assert "libcomp_default.so" in lines[0] and "libptxonly.so" in lines[1]
    file = tmp_path / "constraints.txt"
    index = ["--index-url", main]
    assert pip_picks(tmp_path, index, None).startswith("demo_kernels-3.0-")
    assert pip_picks(tmp_path, index, file).startswith("demo_kernels-1.0-")
    assert uv_picks(tmp_path, index, None) == "demo-kernels==3.0"
    assert uv_picks(tmp_path, index, file) == "demo-kernels==1.0"


def test_a_local_variant_is_excluded_alone(served: tuple[str, str], tmp_path: Path) -> None:
    """RTX PRO 6000 (12.0), both indexes: 3.0+cu130 (sm_80 SASS only: another major) and
    3.0+cpu (no device code) are excluded by their local versions; 3.0 (sm_120a SASS, which
    runs on exactly 12.0) is not, and `!=3.0+cu130` leaves it in. Without the file both
    resolvers take 3.0+cu130 (a local label sorts above its public version); with it, 3.0."""
    main, extra = served
    indexes = ["--index-url", main, "--extra-index-url", extra]
    code, lines = constraints(tmp_path, "12.0", *indexes)
    assert code == 0
    assert [line.split("  #")[0] for line in lines] == [
        "demo-kernels!=3.0+cu130",
        "demo-kernels!=3.0+cpu",
    ]
    assert "(12.0) none: " in lines[0] and "(12.0) no-kernels: " in lines[1]
    file = tmp_path / "constraints.txt"
    assert pip_picks(tmp_path, indexes, None).startswith("demo_kernels-3.0+cu130-")
    assert pip_picks(tmp_path, indexes, file).startswith("demo_kernels-3.0-")
    assert uv_picks(tmp_path, indexes, None) == "demo-kernels==3.0+cu130"
    assert uv_picks(tmp_path, indexes, file) == "demo-kernels==3.0"


def test_nothing_judged_writes_no_file(served: tuple[str, str], tmp_path: Path) -> None:
    """An index without the project: nothing was read, so no file that would exclude nothing
    (it would read as a clean bill): exit 2 and the reason."""
    main, _ = served
    path = tmp_path / "constraints.txt"
    result = run_cli("versions", "no-such-project", "--gpu", "T4", "--index-url", main, *TARGET,
                     "--constraints", str(path), env=CLEAN)  # fmt: skip
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "--constraints" in result.stderr and "nothing written" in result.stderr
    assert not path.exists()
