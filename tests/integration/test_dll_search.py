"""The DLL search order as the load rule for Windows wheels (analysis.verdicts.dllsearch), and a
sixth real Windows wheel (CTranslate2 4.8.5), read from Linux, never installed nor imported.

Expectations, from oracles archgap does not write:
- the rule: Python 3.8+ looks for the DLLs an extension module (or a DLL ctypes loads by its
  path) imports in the system paths, the directory of the module being loaded and the
  directories added with ``os.add_dll_directory``; PATH and the current directory are not
  searched (What's New In Python 3.8; CPython's dynload_win.c: LoadLibraryExW with
  LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR);
- what an image imports: its import table parsed field by field from Microsoft's PE format
  specification in ``tests.pe_build`` (not the reader's code);
- what a package adds: its released source, read here by eye (the lines are found by their
  text), or the patch delvewheel 1.11.2 writes into ``__init__.py`` (as in pymeshfix's
  released ``__init__.py``);
- CTranslate2's device code: the independent walk of the fatbin wrappers and containers in
  test_pe_wheels, and the Linux build of the same release (tests/.data/venv-ctranslate2-4.8.5:
  the same targets).
"""

from __future__ import annotations

import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from archgap.archives.platform import foreign_wheel_note, install_note
from archgap.archives.wheel import read_wheel
from archgap.probe.binary.fatbin import read_bytes
from archgap.probe.environment.dlldirs import registered_directories
from tests.helpers import DATA, json_output, run_cli
from tests.integration.test_pe_wheels import registered_listed
from tests.loopback_index import NGINX, Listing, make_wheel, nginx_server, write_index
from tests.pe_build import spec_imports

WHEELS = DATA / "wheels-win"
BNB = WHEELS / "bitsandbytes-0.50.2-py3-none-win_amd64.whl"
BNB_ARM = WHEELS / "bitsandbytes-0.50.2-py3-none-win_arm64.whl"
RUNTIME = WHEELS / "nvidia_cuda_runtime-13.0.96-py3-none-win_amd64.whl"
CT2 = WHEELS / "ctranslate2-4.8.5-cp312-cp312-win_amd64.whl"
CUPY_ENV = DATA / "venv-cupy-cuda12x-14.2.0/lib/python3.11/site-packages/cupy/_environment.py"
pytestmark = pytest.mark.skipif(not CT2.exists(), reason="scripts/testdata downloads them")

CUDA121 = "bitsandbytes/libbitsandbytes_cuda121.dll"
WIN = "py3-none-win_amd64"
# What delvewheel 1.11.2 writes at the top of a patched package's __init__.py
DELVEWHEEL = """# start delvewheel patch
def _delvewheel_patch_1_11_2():
    import os
    if os.path.isdir(libs_dir := os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, 'demo_win.libs'))):
        os.add_dll_directory(libs_dir)


_delvewheel_patch_1_11_2()
del _delvewheel_patch_1_11_2
# end delvewheel patch
"""  # noqa: E501


def member(wheel: Path, name: str) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(name)


def lines_with(source: str, text: str) -> list[int]:
    return [n for n, line in enumerate(source.splitlines(), 1) if text in line]


# --- what a package's own code adds to the search path, from its released source -------------


def test_ctranslate2_adds_its_own_folder() -> None:
    """CTranslate2 4.8.5's __init__.py: ``package_dir = str(files(module_name))`` (its folder),
    ``site_dir = os.path.dirname(package_dir)``, ``dll_dirs`` = site_dir/_rocm_sdk_core/bin and
    a glob of site_dir/_rocm_sdk_libraries*/bin, or else $HIP_PATH/bin; then
    ``for path in [package_dir] + dll_dirs: os.add_dll_directory(path)``. The HIP_PATH one
    depends on the environment: that call's directory is not all read."""
    source = member(CT2, "ctranslate2/__init__.py").decode()
    found, unread = registered_directories(source, "W/ctranslate2/__init__.py")
    assert set(found) == {"W/ctranslate2", "W/_rocm_sdk_core/bin", "W/_rocm_sdk_libraries*/bin"}
    assert unread == lines_with(source, "os.add_dll_directory(path)")


def test_cupy_adds_only_what_the_environment_says() -> None:
    """CuPy 14.2.0's _environment.py (pure Python, the file its Windows wheel ships): it adds
    CUDA_PATH's bin, its x64 folder and ``get_cupy_install_path()``/cupy/.data/lib: each
    depends on the environment or a function's result, so none is read and every call is
    reported."""
    source = CUPY_ENV.read_text()
    found, unread = registered_directories(source, "W/cupy/_environment.py")
    assert found == []
    assert unread == lines_with(source, "os.add_dll_directory(")
    assert len(unread) == 3


def test_delvewheel_patch_adds_the_libs_folder_beside_the_package() -> None:
    found, unread = registered_directories(DELVEWHEEL, "W/demo_win/__init__.py")
    assert (found, unread) == (["W/demo_win.libs"], [])


TORCH_2 = """
import os, sys
def _load_dll_libraries():
    py_dll_path = os.path.join(sys.exec_prefix, "Library", "bin")
    th_dll_path = os.path.join(os.path.dirname(__file__), "lib")
    dll_paths = [p for p in (th_dll_path, py_dll_path) if os.path.exists(p)]
    cuda_path = os.path.join(os.getenv("CUDA_PATH_V12_8", "C:/CUDA"), "bin")
    dll_paths.extend(p for p in (cuda_path,) if os.path.exists(p))
    for dll_path in dll_paths:
        os.add_dll_directory(dll_path)
"""
TORCH_1 = """
import os, sys
if sys.platform == "win32":
    py_dll_path = os.path.join(sys.exec_prefix, "Library", "bin")
    th_dll_path = os.path.join(os.path.dirname(__file__), "lib")
    dll_paths = list(filter(os.path.exists, [th_dll_path, py_dll_path]))
    for dll_path in dll_paths:
        if sys.version_info >= (3, 8):
            os.add_dll_directory(dll_path)
"""


@pytest.mark.parametrize("source", [TORCH_2, TORCH_1], ids=["2.x", "1.x"])
def test_torch_shape_adds_torch_lib_and_says_what_it_cannot_read(source: str) -> None:
    """The shapes of torch's Windows block in torch/__init__.py: 2.x's ``_load_dll_libraries``
    (``th_dll_path = os.path.join(os.path.dirname(__file__), "lib")``, the environment's
    Library/bin filtered by ``os.path.exists`` in a comprehension, CUDA_PATH_Vxx's bin added by
    ``.extend``, then ``for dll_path in dll_paths: os.add_dll_directory(dll_path)``), and 1.x's
    ``list(filter(os.path.exists, [...]))``: torch/lib is read, the rest depends on the
    environment (that call is not all read)."""
    found = registered_directories(source, "W/torch/__init__.py")
    assert found == (["W/torch/lib"], lines_with(source, "os.add_dll_directory("))


# --- the load rule on wheels: real DLLs, their real import tables ------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Files to build wheels from: bitsandbytes' CUDA 12.1 DLL (it imports cudart64_12.dll,
    cublas64_12.dll and cublasLt64_12.dll: test_pe_wheels), and DLLs of those names (CUDA
    13's runtime DLL under each name: the search goes by name)."""
    root = tmp_path_factory.mktemp("dlls")
    files = {"image": root / "libbitsandbytes_cuda121.dll", "init": root / "__init__.py"}
    files["image"].write_bytes(member(BNB, CUDA121))
    files["init"].write_text(DELVEWHEEL)
    runtime = member(RUNTIME, "nvidia/cu13/bin/x86_64/cudart64_13.dll")
    for name in ("cudart64_12.dll", "cublas64_12.dll", "cublasLt64_12.dll"):
        files[name] = root / name
        files[name].write_bytes(runtime)
    plain = root / "plain_init.py"
    plain.write_text("from . import core\n")
    files["plain"] = plain
    return files


def scan(*wheels: Path, gpu: str = "sm_86") -> dict[str, Any]:
    result = run_cli("scan", *map(str, wheels), "--gpu", gpu, "--json")
    assert "Traceback" not in result.stderr
    return json_output(result, "scan")


def dll_findings(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in doc["load"] if f["check"] == "needed-library"]


def verdict(doc: dict[str, Any], package: str) -> str:
    (row,) = [p for p in doc["packages"] if p["package"] == package]
    return str(row["verdict"])


def test_the_import_table_names_cuda_12_dlls() -> None:
    imports, delayed = spec_imports(member(BNB, CUDA121))
    assert {"cudart64_12.dll", "cublas64_12.dll", "cublasLt64_12.dll"} <= set(imports)
    assert delayed == []


def test_dlls_nobody_ships_or_adds_block_the_library(
    tmp_path: Path, built: dict[str, Path]
) -> None:
    """Nothing in the wheel and no requirement: the three CUDA DLLs are not found (PATH is not
    searched), so the library does not load although it holds sm_86 SASS: blocked on 8.6."""
    wheel = make_wheel(tmp_path, "demo-win", "1.0", {"demo_win/x.dll": built["image"]}, tag=WIN)
    doc = scan(wheel)
    (finding,) = dll_findings(doc)
    assert finding["status"] == "fails"
    for name in ("cudart64_12.dll", "cublas64_12.dll", "cublasLt64_12.dll"):
        assert name in finding["cause"]
    assert "PATH is not searched" in finding["cause"]
    assert "pip install" in finding["fix"] and "nvidia-cuda-runtime-cu12" in finding["fix"]
    assert verdict(doc, "demo-win") == "blocked"


def test_dlls_beside_the_image_are_found(tmp_path: Path, built: dict[str, Path]) -> None:
    """LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR: the directory of the module being loaded."""
    members = {"demo_win/x.dll": built["image"]}
    members |= {f"demo_win/{n}": built[n] for n in ("cudart64_12.dll", "cublas64_12.dll",
                                                      "cublasLt64_12.dll")}  # fmt: skip
    doc = scan(make_wheel(tmp_path, "demo-win", "1.0", members, tag=WIN))
    assert dll_findings(doc) == []
    assert verdict(doc, "demo-win") == "native"


def test_a_libs_folder_counts_only_when_the_package_adds_it(
    tmp_path: Path, built: dict[str, Path]
) -> None:
    """delvewheel's layout: the DLLs in demo_win.libs beside the package. With its patch in
    __init__.py (os.add_dll_directory of that folder) they are found; without it, they lie
    there unsearched: the finding says where, and the fix is to add that folder."""
    libs = {f"demo_win.libs/{n}": built[n] for n in ("cudart64_12.dll", "cublas64_12.dll",
                                                     "cublasLt64_12.dll")}  # fmt: skip
    patched = tmp_path / "patched"
    plain = tmp_path / "plain"
    patched.mkdir()
    plain.mkdir()
    image = {"demo_win/x.dll": built["image"]}
    with_patch = {**image, **libs, "demo_win/__init__.py": built["init"]}
    without = {**image, **libs, "demo_win/__init__.py": built["plain"]}
    good = make_wheel(patched, "demo-win", "1.0", with_patch, tag=WIN)
    bad = make_wheel(plain, "demo-win", "1.0", without, tag=WIN)
    found = read_wheel(str(good)).distributions[0]
    assert found.dll_directories == (f"{good}/demo_win.libs",)
    assert dll_findings(scan(good)) == []
    doc = scan(bad)
    (finding,) = dll_findings(doc)
    assert finding["status"] == "fails"
    assert f"lies in {str(bad).lower()}/demo_win.libs, which is not added" in finding["cause"]
    assert finding["fix"].startswith("add the directory that holds")
    assert verdict(doc, "demo-win") == "blocked"


def test_a_requirement_that_adds_its_folder_provides_them(
    tmp_path: Path, built: dict[str, Path]
) -> None:
    """demo-win requires demo-cuda, whose __init__.py adds its bin folder (as torch adds
    torch/lib); judged together, the DLLs are found. Judged alone, demo-win's answer is
    unknown: what it requires was not judged (never 'fails', never healthy)."""
    init = tmp_path / "cuda_init.py"
    init.write_text("import os\nos.add_dll_directory(os.path.join(os.path.dirname(__file__), "
                    "'bin'))\n")  # fmt: skip
    dep = tmp_path / "dep"
    dep.mkdir()
    members = {f"demo_cuda/bin/{n}": built[n] for n in ("cudart64_12.dll", "cublas64_12.dll",
                                                        "cublasLt64_12.dll")}  # fmt: skip
    cuda = make_wheel(dep, "demo-cuda", "1.0", {**members, "demo_cuda/__init__.py": init},
                      tag=WIN)  # fmt: skip
    wheel = make_wheel(tmp_path, "demo-win", "1.0", {"demo_win/x.dll": built["image"]},
                       requires=["demo-cuda>=1"], tag=WIN)  # fmt: skip
    assert dll_findings(scan(wheel, cuda)) == []
    alone = scan(wheel)
    (finding,) = dll_findings(alone)
    assert finding["status"] == "unknown"
    assert "demo-cuda (Requires-Dist) was not judged" in finding["chain"]
    assert verdict(alone, "demo-win") == "native"


def test_an_added_folder_that_is_not_read_is_unknown(
    tmp_path: Path, built: dict[str, Path]
) -> None:
    init = tmp_path / "init.py"
    init.write_text(
        "import os\nos.add_dll_directory(os.path.join(os.environ['CUDA_PATH'], 'bin'))\n"
    )
    members = {"demo_win/x.dll": built["image"], "demo_win/__init__.py": init}
    wheel = make_wheel(tmp_path, "demo-win", "1.0", members, tag=WIN)
    (finding,) = dll_findings(scan(wheel))
    assert finding["status"] == "unknown"
    assert f"the directory added at {wheel}/demo_win/__init__.py:2 was not read" in finding["chain"]


def test_bitsandbytes_alone_takes_cuda_from_torch_unknown() -> None:
    """bitsandbytes 0.50.2's Windows builds import CUDA's runtime and cuBLAS and ship neither;
    it requires torch (METADATA), whose torch/lib holds them on Windows and which its own code
    adds. Its wheel alone: unknown, torch named; no build is blocked by it."""
    doc = scan(BNB, gpu="sm_120")
    (finding,) = dll_findings(doc)
    assert finding["status"] == "unknown"
    assert "torch (Requires-Dist) was not judged" in finding["chain"]
    assert {"cudart64_12.dll", "cublas64_13.dll"} <= set(finding["chain"][0].replace(",", " ")
                                                         .split())  # fmt: skip
    assert not any("DLL search order" in p.get("reason", "") for p in doc["packages"])


# --- the sixth wheel: CTranslate2 4.8.5 for Windows -------------------------------------------

# By hand, from the independent walk: 34 registered containers, each SASS sm_53, 60, 61, 70, 75,
# 80, 86 and PTX compute_86: the targets of the Linux build of the same release.
CT2_TARGETS = {("sass", a) for a in (53, 60, 61, 70, 75, 80, 86)} | {("ptx", 86)}


def test_ctranslate2_kernels_agree_with_the_independent_walk() -> None:
    data = member(CT2, "ctranslate2/ctranslate2.dll")
    facts = read_bytes("ctranslate2.dll", data)
    walked = registered_listed(data)
    listed = Counter((e.kind, e.arch) for e in facts.entries if e.listed for _ in range(e.count))
    assert (facts.format, facts.machine, facts.error) == ("pe", "x86-64", None)
    assert listed == walked
    assert set(walked) == CT2_TARGETS and set(walked.values()) == {34}
    linux = DATA / "venv-ctranslate2-4.8.5/lib/python3.11/site-packages/ctranslate2.libs"
    (so,) = [p for p in linux.iterdir() if p.name.startswith("libctranslate2")]
    assert {(e.kind, e.arch) for e in read_bytes(str(so), so.read_bytes()).entries
            if e.listed} == CT2_TARGETS  # fmt: skip


def test_ctranslate2_scan_per_gpu() -> None:
    """NVIDIA's rules on those targets: RTX 4090 (8.9) runs sm_86 SASS (same major, 6 <= 9):
    native; RTX PRO 6000 (12.0) has no SASS of major 12, the driver JITs compute_86 PTX: jit;
    a Maxwell 5.0 is below sm_53 and compute_86: none. ctranslate2.dll imports no CUDA DLL (it
    opens cuBLAS at run time), and _ext.pyd imports ctranslate2.dll, which lies beside it: no
    DLL search finding. Its __init__.py adds its own folder (read from the wheel)."""
    imports, _ = spec_imports(member(CT2, "ctranslate2/ctranslate2.dll"))
    assert not any(n.lower().startswith(("cudart", "cublas")) for n in imports)
    assert "ctranslate2.dll" in spec_imports(member(CT2, "ctranslate2/_ext.cp312-win_amd64.pyd"))[0]
    doc = json_output(run_cli("scan", str(CT2), "--gpu", "8.9,12.0,5.0", "--json"), "scan")
    rows = {p["gpu"]: p["verdict"] for p in doc["packages"] if p["package"] == "ctranslate2"}
    assert rows == {"8.9": "native", "12.0": "jit", "5.0": "none"}
    assert dll_findings(doc) == []
    (dist,) = read_wheel(str(CT2)).distributions
    assert f"{CT2}/ctranslate2" in (dist.dll_directories or ())


# --- the platform named: a Windows wheel on Linux, a Linux wheel on Windows --------------------


def test_the_platform_is_named_both_ways() -> None:
    linux_wheel = "x/nvidia_curand-10.4.0.35-py3-none-manylinux_2_27_x86_64.whl"
    assert foreign_wheel_note(str(CT2), ["pe"], "Linux") == (
        "a Windows wheel (win_amd64): judged for its device code; it cannot be installed on this "
        "Linux host"
    )
    assert foreign_wheel_note(linux_wheel, ["elf"], "Windows") == (
        "a Linux wheel (manylinux_2_27_x86_64): judged for its device code; it cannot be "
        "installed on this Windows host"
    )
    assert foreign_wheel_note(linux_wheel, ["elf"], "Linux") is None
    assert foreign_wheel_note(str(CT2), ["pe"], "Windows") is None
    assert install_note("win_amd64", "Linux") == (
        "run it on a Windows machine: there it installs the win_amd64 wheel judged; on this "
        "Linux host pip would choose another wheel of that version"
    )
    assert install_note("manylinux_2_28_x86_64", "Windows") is not None
    assert install_note("manylinux_2_28_x86_64", "Linux") is None and install_note(None) is None


@pytest.mark.skipif(NGINX is None, reason="scripts/services installs nginx-light")
def test_versions_judges_the_windows_wheels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bitsandbytes 0.50.2 on an index with its win_amd64 and win_arm64 wheels only:
    ``--platform win_amd64`` judges the x64 one (its CUDA 12.8/13.x builds hold sm_120 SASS, the
    older ones nothing for 12.0: partial), ``--platform win_arm64`` the ARM64 one (sm_121 SASS
    only: native on a GB10, nothing for 12.0), and a Linux platform finds no wheel (exit 2).
    The pip line is said to be for a Windows machine."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    env = {"PIP_INDEX_URL": "", "PIP_EXTRA_INDEX_URL": "", "PIP_CONFIG_FILE": "/dev/null"}
    write_index(tmp_path / "srv", "main", {"bitsandbytes": [Listing(BNB), Listing(BNB_ARM)]},
                "simple")  # fmt: skip
    (tmp_path / "nginx").mkdir()
    with nginx_server(tmp_path / "srv", tmp_path / "nginx") as url:
        index = ("--index-url", f"{url}/main/simple", "--python-version", "3.12")

        def versions(*args: str) -> tuple[int, dict[str, Any], str]:
            text = run_cli("versions", "bitsandbytes", *args, *index, env=env)
            result = run_cli("versions", "bitsandbytes", *args, *index, "--json", env=env)
            assert "Traceback" not in result.stderr + text.stderr
            return result.returncode, json_output(result, "versions"), text.stdout

        code, doc, text = versions("--gpu", "12.0", "--platform", "win_amd64")
        assert code == 0 and doc["platform"] == "win_amd64"
        (row,) = doc["versions"]
        assert row["wheel"] == BNB.name and row["verdicts"][0]["verdict"] == "partial"
        assert "wheels for Python 3.12 on win_amd64" in text
        assert "run it on a Windows machine: there it installs the win_amd64 wheel" in text
        code, doc, _ = versions("--gpu", "12.1,12.0", "--platform", "win_arm64")
        (row,) = doc["versions"]
        assert row["wheel"] == BNB_ARM.name
        assert [v["verdict"] for v in row["verdicts"]] == ["native", "none"] and code == 1
        code, doc, _ = versions("--gpu", "12.0", "--platform", "manylinux_2_28_x86_64")
        assert code == 2 and doc["versions"] == []
