"""`scan REQUIREMENT --deps`: the dependency set resolved like pip for the target, from a real
index on loopback, then every wheel of the set judged.

The projects (wheels packaged here from the nvcc fixture libraries; nvidia-cuda-runtime is the
real wheel from PyPI, tests/.data):

- demo-app 1.0, no native code. Requires-Dist: ``demo-kernels>=2,<3``;
  ``nvidia-cuda-runtime>=13; sys_platform == "linux"``; ``demo-win; sys_platform == "win32"``;
  ``demo-old; python_version < "3.10"``; ``demo-extra; extra == "full"``.
  (demo-win and demo-old are on no index: asking for them would be a 404 problem.)
- demo-kernels 2.0 = libptxonly.so (PTX compute_80 only), requires ``demo-app`` (a cycle);
  3.0 = libcomp_default.so (SASS sm_80, sm_120a; PTX compute_90).
- demo-extra 1.0 = libdebug.so (SASS sm_80 only), requires ``demo-kernels>=3`` (which the
  2.0 chosen first does not satisfy) and ``demo-gone>=1`` (only a 0.5 exists).

For Python 3.12 on manylinux_2_28_x86_64, pip installs demo-app 1.0, demo-kernels 2.0 (the newest
below 3) and nvidia-cuda-runtime 13.0.96 (Linux); with ``[full]`` also demo-extra 1.0.

`kernels REQUIREMENT --deps` lists the members of the same set; each member's listing is what
cuobjdump prints for it (nvidia-cuda-runtime's members are extracted and given to the real
cuobjdump; the fixture libraries' targets are those build.sh asks nvcc for).
"""

from __future__ import annotations

import csv
import io
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from archgap.index.deps import ROOT, _Walk, marker_environment, resolve_set
from tests.helpers import CUDA_BIN, DATA, json_output, run_cli
from tests.integration.test_kernels_cuobjdump import CUOBJDUMP, cuobjdump_names
from tests.loopback_index import (
    NGINX,
    CountingHandler,
    Listing,
    make_wheel,
    nginx_server,
    plain_server,
    write_index,
)

RUNTIME = next(iter((DATA / "wheels").glob("nvidia_cuda_runtime-13.0.96-*.whl")), None)
TARGET = ("--python-version", "3.12", "--platform", "manylinux_2_28_x86_64")
ENV = {"PIP_INDEX_URL": "", "PIP_EXTRA_INDEX_URL": "", "UV_INDEX_URL": "",
       "PIP_CONFIG_FILE": "/dev/null"}  # fmt: skip
APP_REQUIRES = (
    "demo-kernels>=2,<3",
    'nvidia-cuda-runtime>=13; sys_platform == "linux"',
    'demo-win; sys_platform == "win32"',
    'demo-old; python_version < "3.10"',
    'demo-extra; extra == "full"',
)

pytestmark = [
    pytest.mark.skipif(NGINX is None, reason="scripts/services installs nginx-light"),
    pytest.mark.skipif(RUNTIME is None, reason="scripts/testdata downloads the wheels"),
]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The index tree: HTML pages with PEP 658 metadata for demo-app and demo-kernels (the
    others' METADATA is read from the wheel)."""
    assert RUNTIME is not None
    base = tmp_path_factory.mktemp("deps")
    build = base / "build"
    build.mkdir()

    def wheel(name: str, version: str, lib: str | None, requires: tuple[str, ...] = ()) -> Path:
        members = {f"{name.replace('-', '_')}/{lib}": CUDA_BIN / lib} if lib else {}
        return make_wheel(build, name, version, members, requires)

    projects = {
        "demo-app": [Listing(wheel("demo-app", "1.0", None, APP_REQUIRES), metadata=True)],
        "demo-kernels": [
            Listing(wheel("demo-kernels", "2.0", "libptxonly.so", ("demo-app",)), metadata=True),
            Listing(wheel("demo-kernels", "3.0", "libcomp_default.so"), metadata=True),
        ],
        "demo-extra": [
            Listing(wheel("demo-extra", "1.0", "libdebug.so", ("demo-kernels>=3", "demo-gone>=1")))
        ],
        "demo-gone": [Listing(wheel("demo-gone", "0.5", None))],
        "nvidia-cuda-runtime": [Listing(RUNTIME)],
    }
    write_index(base / "srv", "main", projects, "simple")
    return base


@pytest.fixture(scope="module")
def nginx(root: Path) -> Iterator[str]:
    prefix = root / "nginx"
    prefix.mkdir()
    with nginx_server(root / "srv", prefix) as url:
        yield f"{url}/main/simple"


@pytest.fixture(autouse=True)
def clean_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_the_set_pip_would_install(root: Path) -> None:
    """Markers for Linux/3.12: demo-win (win32) and demo-old (< 3.10) are left out, so no 404
    for them; demo-kernels 2.0 -> demo-app closes a cycle. demo-app's and demo-kernels'
    Requires-Dist come from their .metadata files: those wheels are never fetched."""
    with plain_server(root / "srv") as url:
        CountingHandler.requests.clear()
        found = resolve_set(["demo-app"], [f"{url}/main/simple"], "3.12", "manylinux_2_28_x86_64")
        asked = list(CountingHandler.requests)
    assert [(c.name, c.version) for c in found.chosen] == [
        ("demo-app", "1.0"),
        ("demo-kernels", "2.0"),
        ("nvidia-cuda-runtime", "13.0.96"),
    ]
    assert found.problems == ()
    kernels = found.chosen[1]
    assert kernels.required_by == ("demo-app 1.0",) and found.chosen[0].required_by == (
        ROOT,
        "demo-kernels 2.0",
    )
    assert "/main/files/demo_app-1.0-py3-none-manylinux_2_17_x86_64.whl.metadata" in asked
    assert not any(a.endswith(".whl") and "demo_" in a for a in asked)
    assert not any("demo-win" in a or "demo-old" in a for a in asked)


def test_extras_conflicts_and_missing_versions_are_problems(nginx: str) -> None:
    found = resolve_set(["demo-app[full]"], [nginx], "3.12", "manylinux_2_28_x86_64")
    assert [(c.name, c.version) for c in found.chosen] == [
        ("demo-app", "1.0"),
        ("demo-kernels", "2.0"),
        ("nvidia-cuda-runtime", "13.0.96"),
        ("demo-extra", "1.0"),
    ]
    problems = {p.requirement: (p.required_by, p.reason) for p in found.problems}
    assert set(problems) == {"demo-kernels>=3", "demo-gone>=1"}
    by, why = problems["demo-kernels>=3"]
    assert by == "demo-extra 1.0"
    assert "demo-kernels 2.0 was chosen first (for demo-app 1.0)" in why
    assert "no backtracking" in why
    by, why = problems["demo-gone>=1"]
    assert by == "demo-extra 1.0" and "no wheel for Python 3.12" in why


def test_a_failed_requirement_is_not_kept(nginx: str) -> None:
    """After `demo-kernels>=3` failed against the 2.0 chosen and `demo-gone>=1` found nothing,
    a later `demo-kernels` is satisfied by 2.0 and a later `demo-gone` gets 0.5. Breadth first
    without backtracking: a root `demo-kernels` before demo-app's `<3` would take 3.0 and make
    the `<3` the conflict (pip would backtrack to 2.0)."""
    walk = _Walk([nginx], "3.12", "manylinux_2_28_x86_64")
    for text in ("demo-kernels<3", "demo-kernels>=3", "demo-kernels", "demo-gone>=1", "demo-gone"):
        walk.add(Requirement(text), "test")
    found = walk.result()
    assert [p.requirement for p in found.problems] == ["demo-kernels>=3", "demo-gone>=1"]
    assert [(c.name, c.version) for c in found.chosen] == [
        ("demo-kernels", "2.0"),
        ("demo-gone", "0.5"),
    ]
    early = resolve_set(["demo-kernels", "demo-app"], [nginx], "3.12", "manylinux_2_28_x86_64")
    assert [(c.name, c.version) for c in early.chosen][:2] == [
        ("demo-kernels", "3.0"),
        ("demo-app", "1.0"),
    ]
    assert [p.requirement for p in early.problems] == ["demo-kernels<3,>=2"]


def test_markers_follow_the_target() -> None:
    windows = marker_environment("3.9", "win_amd64")
    assert (windows["sys_platform"], windows["platform_machine"], windows["python_version"]) == (
        "win32",
        "AMD64",
        "3.9",
    )
    arm = marker_environment("3.12.4", "manylinux_2_28_aarch64")
    assert (arm["sys_platform"], arm["platform_machine"], arm["python_full_version"]) == (
        "linux",
        "aarch64",
        "3.12.4",
    )


def test_scan_deps_judges_the_whole_set(nginx: str) -> None:
    """On 12.0: demo-kernels 2.0 has only PTX compute_80, which the driver JITs for 12.0;
    nvidia-cuda-runtime has no kernel library (libcudadevrt.a is a device-link archive);
    demo-app has no native file. With [full], demo-extra's libdebug.so (sm_80 SASS only) has
    nothing for 12.0: a gap, exit 1, and the two unresolved requirements are problems."""
    args = ("scan", "demo-app", "--deps", "--gpu", "12.0", "--index-url", nginx, *TARGET)
    result = run_cli(*args, "--json", env=ENV)
    assert result.returncode == 0, result.stderr
    doc = json_output(result, "scan")
    assert {(p["package"], p["version"], p["verdict"]) for p in doc["packages"]} == {
        ("demo-kernels", "2.0", "jit"),
        ("nvidia-cuda-runtime", "13.0.96", "no-kernels"),
    }
    # nginx serves ranges: each wheel read is marked unverified (the index gave its sha256)
    assert {p["reason"].split(":")[0] for p in doc["problems"]} == {"unverified"}
    assert len(doc["problems"]) == 3
    full = run_cli("scan", "demo-app[full]", *args[2:], "--json", env=ENV)
    assert full.returncode == 1, full.stderr
    doc = json_output(full, "scan")
    verdicts = {(p["package"], p["verdict"]) for p in doc["packages"]}
    assert ("demo-extra", "none") in verdicts
    unresolved = {p["subject"] for p in doc["problems"] if not p["reason"].startswith("unverified")}
    assert unresolved == {"demo-kernels>=3", "demo-gone>=1"}
    plain = run_cli("scan", "demo-app", "--gpu", "12.0", "--index-url", nginx, *TARGET, env=ENV)
    assert plain.returncode == 0 and "No installed package carries CUDA device code" in (
        plain.stdout
    )


def listed(file: dict[str, Any]) -> tuple[list[str], list[str]]:
    """A kernels --json file's entries as cuobjdump names them: (--list-elf, --list-ptx)."""
    entries = [e for e in file["entries"] if e["listed"]]
    sass = [f"sm_{e['arch']}{'a' if e['variant'] == 'a' else ''}" for e in entries
            if e["kind"] == "sass"]  # fmt: skip
    return sass, [f"sm_{e['arch']}{e['variant']}" for e in entries if e["kind"] == "ptx"]


def kernels_json(*args: str, code: int) -> dict[str, Any]:
    result = run_cli("kernels", *args, *TARGET, "--json", env=ENV)
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    return json_output(result, "kernels")


def test_kernels_reads_only_the_named_wheel_by_default(nginx: str) -> None:
    """pip's --no-deps is the default: demo-app alone, which has no native member."""
    doc = kernels_json("demo-app", "--index-url", nginx, code=0)
    assert [(r["name"], r["version"], r["required_by"]) for r in doc["resolved"]] == [
        ("demo-app", "1.0", [ROOT])
    ]
    assert doc["files"] == []


@pytest.mark.skipif(CUOBJDUMP is None, reason="scripts/testdata installs cuobjdump")
def test_kernels_deps_lists_the_set_as_cuobjdump_does(nginx: str, tmp_path: Path) -> None:
    """The set pip installs (above); demo-kernels 2.0's libptxonly.so holds only PTX
    compute_80 (build.sh: -gencode arch=compute_80,code=compute_80), and every member of the
    nvidia-cuda-runtime wheel lists what cuobjdump lists for it, extracted."""
    assert RUNTIME is not None
    doc = kernels_json("demo-app", "--deps", "--index-url", nginx, code=0)
    assert [(r["name"], r["version"]) for r in doc["resolved"]] == [
        ("demo-app", "1.0"),
        ("demo-kernels", "2.0"),
        ("nvidia-cuda-runtime", "13.0.96"),
    ]
    assert doc["resolved"][1]["file"] == "demo_kernels-2.0-py3-none-manylinux_2_17_x86_64.whl"
    by_member = {f["path"].split(".whl/", 1)[1]: f for f in doc["files"]}
    assert listed(by_member.pop("demo_kernels/libptxonly.so")) == ([], ["sm_80"])
    with zipfile.ZipFile(RUNTIME) as zf:
        native = [n for n in zf.namelist() if n in by_member]
        assert native and set(native) == set(by_member)
        zf.extractall(tmp_path, native)
    for member in native:
        expected = tuple(
            cuobjdump_names(tmp_path / member, o) for o in ("--list-elf", "--list-ptx")
        )
        assert listed(by_member[member]) == expected, member
    assert any(listed(f)[0] for f in by_member.values())  # libcudadevrt.a: SASS to compare


def test_kernels_deps_unresolved_requirements_are_reported_rows(nginx: str) -> None:
    """With [full]: demo-extra's libdebug.so (build.sh: -G, SASS sm_80 only) is read; its
    demo-kernels>=3 (2.0 was chosen first, no backtracking) and demo-gone>=1 (only 0.5) are
    unreadable rows with the reason and who required them: exit 2 (the set was not read
    whole). The text names the resolved wheels; a project no index has is a 404 row."""
    doc = kernels_json("demo-app[full]", "--deps", "--index-url", nginx, code=2)
    assert doc["resolved"][0]["extras"] == ["full"]
    by_path = {f["path"].split(".whl/", 1)[-1]: f for f in doc["files"]}
    # nvcc's device-link step puts the cubin in twice: cuobjdump --list-elf prints ELF file 1
    # and 2, both k.sm_80.cubin
    assert listed(by_path["demo_extra/libdebug.so"]) == (["sm_80", "sm_80"], [])
    kernels3, gone = by_path["demo-kernels>=3"], by_path["demo-gone>=1"]
    assert kernels3["format"] == gone["format"] == "unreadable"
    assert "no backtracking" in kernels3["error"]
    assert kernels3["error"].endswith("(required by demo-extra 1.0)")
    assert "no wheel for Python 3.12" in gone["error"]
    assert doc["summary"]["unreadable"] == 2
    text = run_cli("kernels", "demo-app[full]", "--deps", "--index-url", nginx, *TARGET, env=ENV)
    assert text.returncode == 2 and "Traceback" not in text.stderr
    assert "demo-extra 1.0  demo_extra-1.0-py3-none-manylinux_2_17_x86_64.whl" in text.stdout
    assert "(required by demo-app 1.0)" in text.stdout
    missing = kernels_json("no-such-project==1.0", "--index-url", nginx, code=2)
    assert "HTTP 404" in missing["files"][0]["error"] and "resolved" not in missing


def test_kernels_requirements_are_not_read_on_a_remote_target() -> None:
    """A remote target's paths are that machine's; URLs and requirements are resolved and read
    here: asking for both is a usage error (exit 2, one line), before any connection."""
    result = run_cli("kernels", "demo-app", "--deps", "--host", "nobody@127.0.0.1:1", env=ENV)
    assert result.returncode == 2
    assert "URLs and requirements are read here: not with a remote target" in result.stderr
    assert "Traceback" not in result.stderr


def test_kernels_markdown_and_csv_name_the_resolved_wheels(nginx: str) -> None:
    """The wheels the requirements resolved to, as JSON's ``resolved`` has them (above), in
    the paste-ready formats. Markdown: a table of them before the files' tables. CSV: still one
    rectangular table; the resolved wheel each row came from in three columns after the path,
    and demo-app (no native member) a row of its own with empty target cells."""
    args = ("demo-app[full]", "--deps", "--index-url", nginx, *TARGET)
    md = run_cli("kernels", *args, "--format", "markdown", env=ENV)
    assert md.returncode == 2 and "Traceback" not in md.stderr  # two unresolved: as above
    # the set of test_kernels_deps_unresolved_requirements_are_reported_rows: demo-app[full]
    # (named, and required back by demo-kernels 2.0), what its APP_REQUIRES name for Linux and
    # Python 3.12, and its extra's demo-extra
    table = md.stdout.split("Resolved 4 wheel(s):\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert table[0] == "| project | version | wheel | required by |"
    runtime = "nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
    assert table[2:] == [
        "| demo-app\\[full\\] | 1.0 | `demo_app-1.0-py3-none-manylinux_2_17_x86_64.whl` | "
        "named, demo-kernels 2.0 |",
        "| demo-kernels | 2.0 | `demo_kernels-2.0-py3-none-manylinux_2_17_x86_64.whl` | "
        "demo-app 1.0 |",
        f"| nvidia-cuda-runtime | 13.0.96 | `{runtime}` | demo-app 1.0 |",
        "| demo-extra | 1.0 | `demo_extra-1.0-py3-none-manylinux_2_17_x86_64.whl` | demo-app 1.0 |",
    ]
    assert md.stdout.index("Resolved 4 wheel(s)") < md.stdout.index("libdebug.so")
    out = run_cli("kernels", *args, "--format", "csv", env=ENV)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    rows = list(csv.reader(io.StringIO(out.stdout)))
    assert rows[0][:4] == ["file", "project", "version", "required by"]
    assert {len(r) for r in rows} == {len(rows[0])}  # rectangular
    by_project: dict[str, list[list[str]]] = {}
    for row in rows[1:]:
        by_project.setdefault(row[1], []).append(row)
    assert sorted(by_project) == [
        "demo-app[full]", "demo-extra", "demo-kernels", "nvidia-cuda-runtime"
    ]  # fmt: skip
    [app] = by_project["demo-app[full]"]
    assert app[0].endswith("/demo_app-1.0-py3-none-manylinux_2_17_x86_64.whl")
    assert app[2:4] == ["1.0", "named, demo-kernels 2.0"]
    assert set(app[4:]) == {""}  # no device code
    # libdebug.so (build.sh: -G, SASS sm_80 only): one target row, from demo-extra
    [debug] = by_project["demo-extra"]
    assert debug[0].endswith(".whl/demo_extra/libdebug.so") and debug[2:4] == [
        "1.0",
        "demo-app 1.0",
    ]
    assert debug[4:6] == ["sm_80", "sass"] and debug[-1] == "listed"
    [ptx] = by_project["demo-kernels"]  # libptxonly.so: PTX compute_80 only
    assert ptx[4:6] == ["compute_80", "ptx"]
