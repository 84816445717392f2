"""Five of issue 38's ten GPU packages, judged from their real wheels (scripts/testdata: the
members that decide, unpacked; catboost's wheel kept whole), each cell worked out by hand.

What the files hold: cuobjdump 13.5 (the PyPI nvidia-cuda-cuobjdump, tests/.data/venv-cuobjdump),
run by hand and again by ``test_the_listing_is_cuobjdumps`` below:
- xgboost-cu13 3.3.0, xgboost/lib/libxgboost.so: ``--list-elf`` 65 modules each of sm_75, sm_80,
  sm_90, sm_100, sm_120; ``--list-ptx`` 65 of sm_120, whose ``--dump-ptx`` says ``.version 9.0``.
  Its bytes hold "Cuda compilation tools, release 13.0"; no libcudart in its DT_NEEDED (readelf
  -d: libgomp, bundled, and the system's own): the CUDA 13.0 runtime is linked in.
- nvidia-dali-cuda130 2.4.0, nvidia/dali/libdali_kernels.so: one module each of sm_75, sm_80,
  sm_90, sm_100, sm_110, sm_120, no PTX; "Cuda compilation tools, release 13.4" (23 times); its
  DT_NEEDED are DALI's own libdali_core.so and libraries bundled in nvidia/dali/.libs (unpacked).
  Its METADATA: "NVIDIA DALI for CUDA 13.0".
- custatevec-cu13 1.15.0, cuquantum/lib/libcustatevec.so.1: 119 modules each of sm_75, sm_80,
  sm_90, sm_100, sm_110, sm_120, and 119 PTX sm_100 of ``.version 9.4`` (PTX ISA 9.4: CUDA
  13.4's); DT_NEEDED libcublas.so.13 and libcublasLt.so.13 (RUNPATH $ORIGIN and
  $ORIGIN/../../nvidia/cu13/lib), which its METADATA does not require and the venv lacks.
- faiss-gpu-cu12 1.14.1.post1, faiss_gpu_cu12.libs/libfaiss-*.so: 182 modules each of sm_70
  and sm_80, no PTX; DT_NEEDED libcudart.so.12, libcublas.so.12, libcublasLt.so.12 (CUDA 12),
  which its METADATA requires (nvidia-cuda-runtime-cu12, nvidia-cublas-cu12) and the venv lacks.
  Its own README (METADATA): "Supports Volta to Ada Lovelace architecture GPUs (Compute
  Capability 7.0-8.9)".
- catboost 1.2.10, catboost/_catboost.so: cuobjdump 13.5 refuses a full listing ("Support for
  'sm_35' has been removed"); per target (``-arch sm_XY``, which it accepts from sm_75 on) 76
  modules each of sm_75, sm_80, sm_86, sm_89, sm_90, none of sm_100 or sm_120, and 76 PTX sm_90
  of ``.version 7.8`` (PTX ISA 7.8: CUDA 11.8's). Its DT_NEEDED are the system's alone.

NVIDIA's rules (design.md "Compatibility rules", the CUDA Programming Guide): SASS sm_XY runs on
compute capability X.Z with Z >= Y, never across majors; PTX compute_XY is JIT-compiled for any
CC >= X.Y. Compute capabilities (NVIDIA's CUDA GPUs page): T4 7.5, A100 8.0, RTX 4090 8.9,
H100 9.0, B200 10.0, RTX PRO 6000 12.0, V100 7.0.

Drivers (NVIDIA's CUDA 13.2.2 release notes, Table 2; the CUDA Toolkit, Driver and
Architecture Matrix): a CUDA 13.x runtime needs a driver >= 580 (570.124.06 runs up to CUDA
12.8, 535.104.05 up to 12.2); any CUDA 12.x runtime runs on >= 525.60.13 and 11.x on >=
450.80.02 (minor-version compatibility); Blackwell (B200, RTX PRO 6000) needs a driver of the
570 branch or later (570.26, CUDA 12.8's), so on 535 nothing runs there.

A library that cannot load is ``blocked`` where it has kernels, and stays ``none`` where it has
nothing for the GPU (kb/roles.json; tests/integration/test_blocked_and_thin.py). The CUDA
libraries the venvs lack are looked for in this host's loader too (``ldconfig -p``,
LD_LIBRARY_PATH): a machine with a system cuBLAS would load them, and the expectation follows.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import json_output, member_wheel, need_data, run_cli

GPUS = ("T4", "A100", "RTX 4090", "H100", "B200", "RTX PRO 6000", "V100")
BLACKWELL = ("B200", "RTX PRO 6000")
NEW, OLD, OLDER = "580.65.06", "570.124.06", "535.104.05"
CATBOOST_WHEEL = "catboost-1.2.10-cp312-cp312-manylinux2014_x86_64.whl"
CATBOOST_MEMBER = "catboost/_catboost.so"


@dataclass(frozen=True)
class Package:
    name: str  # the distribution, as its METADATA names it
    data: str  # its folder under tests/.data
    library: str  # the deciding library: a glob under site-packages (a member for catboost)
    sass: dict[int, int]  # cuobjdump --list-elf: target -> modules
    ptx: dict[int, int]  # cuobjdump --list-ptx: target -> modules
    ptx_isa: str | None  # cuobjdump --dump-ptx: the PTX's .version
    cuda13: bool  # built by CUDA 13 (its PTX ISA 9.x, its "release 13.x" banner)
    lacks: tuple[str, ...]  # CUDA libraries of its DT_NEEDED that no installed package ships
    kernels: dict[str, str]  # GPU -> its verdict from the kernels alone, with a driver that runs it


PACKAGES = {
    p.name: p
    for p in (
        Package(
            name="xgboost-cu13",
            data="venv-ten-xgboost-cu13",
            library="xgboost/lib/libxgboost.so",
            sass={75: 65, 80: 65, 90: 65, 100: 65, 120: 65},
            ptx={120: 65},
            ptx_isa="9.0",
            cuda13=True,
            lacks=(),
            kernels={
                "T4": "native",  # sm_75 SASS
                "A100": "native",  # sm_80 SASS
                "RTX 4090": "native",  # sm_80 SASS runs on 8.9 (same major, 9 >= 0)
                "H100": "native",  # sm_90 SASS
                "B200": "native",  # sm_100 SASS
                "RTX PRO 6000": "native",  # sm_120 SASS
                "V100": "none",  # no SASS of major 7 at or below 7.0; compute_120 PTX needs >= 12.0
            },
        ),
        Package(
            name="nvidia-dali-cuda130",
            data="venv-ten-dali-cuda130",
            library="nvidia/dali/libdali_kernels.so",
            sass={75: 1, 80: 1, 90: 1, 100: 1, 110: 1, 120: 1},
            ptx={},
            ptx_isa=None,
            cuda13=True,  # its cubins' notes: release 13.4
            lacks=(),
            kernels={
                "T4": "native",  # sm_75
                "A100": "native",  # sm_80
                "RTX 4090": "native",  # sm_80 on 8.9
                "H100": "native",  # sm_90
                "B200": "native",  # sm_100
                "RTX PRO 6000": "native",  # sm_120
                "V100": "none",  # lowest SASS sm_75 > 7.0, and no PTX to JIT
            },
        ),
        Package(
            name="custatevec-cu13",
            data="venv-ten-custatevec-cu13",
            library="cuquantum/lib/libcustatevec.so.1",
            sass={75: 119, 80: 119, 90: 119, 100: 119, 110: 119, 120: 119},
            ptx={100: 119},
            ptx_isa="9.4",
            cuda13=True,
            lacks=("libcublas.so.13", "libcublasLt.so.13"),
            kernels={
                "T4": "native",  # sm_75
                "A100": "native",  # sm_80
                "RTX 4090": "native",  # sm_80 on 8.9
                "H100": "native",  # sm_90
                "B200": "native",  # sm_100
                "RTX PRO 6000": "native",  # sm_120
                "V100": "none",  # sm_75 > 7.0; compute_100 PTX needs >= 10.0
            },
        ),
        Package(
            name="faiss-gpu-cu12",
            data="venv-ten-faiss-gpu-cu12",
            library="faiss_gpu_cu12.libs/libfaiss-*.so",
            sass={70: 182, 80: 182},
            ptx={},
            ptx_isa=None,
            cuda13=False,  # its DT_NEEDED libcudart.so.12
            lacks=("libcudart.so.12", "libcublas.so.12", "libcublasLt.so.12"),
            kernels={
                "T4": "native",  # sm_70 SASS runs on 7.5
                "A100": "native",  # sm_80
                "RTX 4090": "native",  # sm_80 on 8.9
                "H100": "none",  # major 9: no SASS of it, no PTX (its README: CC 7.0-8.9)
                "B200": "none",  # major 10: the same
                "RTX PRO 6000": "none",  # major 12: the same
                "V100": "native",  # sm_70
            },
        ),
        Package(
            name="catboost",
            data="wheels-catboost",
            library=CATBOOST_MEMBER,
            sass={75: 76, 80: 76, 86: 76, 89: 76, 90: 76, 100: 0, 120: 0},
            ptx={90: 76, 100: 0, 120: 0},
            ptx_isa="7.8",
            cuda13=False,  # PTX ISA 7.8: CUDA 11.8
            lacks=(),
            kernels={
                "T4": "native",  # sm_75
                "A100": "native",  # sm_80
                "RTX 4090": "native",  # sm_89
                "H100": "native",  # sm_90
                "B200": "jit",  # no sm_100 SASS; compute_90 PTX (ISA 7.8) JIT-compiles for 10.0
                "RTX PRO 6000": "jit",  # no sm_120 SASS; compute_90 PTX for 12.0
                # V100 left out: cuobjdump 13.5 lists nothing below sm_75 (-arch sm_70 is no
                # longer defined), so no oracle outside archgap says what 7.0 gets
            },
        ),
    )
}


def _cuobjdump() -> Path:
    (venv,) = need_data("venv-cuobjdump")
    (tool,) = venv.glob("lib/python*/site-packages/nvidia/*/bin/cuobjdump")
    return tool


def _library(package: Package, tmp_path: Path) -> Path:
    """The deciding library as a file (catboost's extracted from its wheel)."""
    (folder,) = need_data(package.data)
    if package.name != "catboost":
        (found,) = folder.glob(f"lib/python*/site-packages/{package.library}")
        return found
    with zipfile.ZipFile(folder / CATBOOST_WHEEL) as archive:
        return Path(archive.extract(CATBOOST_MEMBER, tmp_path))


def _listing(tool: Path, library: Path, option: str, arch: int | None = None) -> Counter[int]:
    """cuobjdump's ``--list-elf``/``--list-ptx`` as target -> modules (``-arch sm_XY`` alone)."""
    command = [str(tool), option, str(library)] + (["-arch", f"sm_{arch}"] if arch else [])
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return Counter(int(a) for a in re.findall(r"\.sm_(\d+)\.(?:cubin|ptx)$", out, re.MULTILINE))


def _ptx_isas(tool: Path, library: Path, arch: int) -> set[str]:
    out = subprocess.run([str(tool), "--dump-ptx", "-arch", f"sm_{arch}", str(library)],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return set(re.findall(r"^\.version (\d+\.\d+)$", out, re.MULTILINE))


def _loader_finds(soname: str) -> bool:
    """Whether this host's dynamic loader finds ``soname`` for a library with no RUNPATH into
    the venv: its cache (``ldconfig -p``), an LD_LIBRARY_PATH directory or a trusted directory
    (ld.so(8))."""
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    cache = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, check=True).stdout
    if re.search(rf"^\s*{re.escape(soname)} \(", cache, re.MULTILINE):
        return True
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    dirs += ["/lib", "/usr/lib", "/lib64", "/usr/lib64"]
    return any((Path(d) / soname).exists() for d in dirs)


def _blocks(package: Package, gpu: str, driver: str) -> list[str]:
    """What keeps the package from loading on ``gpu`` with ``driver``, by the rules above."""
    why = [f"{name} missing" for name in package.lacks if not _loader_finds(name)]
    if package.cuda13 and driver != NEW:
        why.append("CUDA 13 needs driver >= 580")
    if gpu in BLACKWELL and driver == OLDER:
        why.append("Blackwell needs driver >= 570")
    return why


def expected(package: Package, gpu: str, driver: str) -> str:
    kernels = package.kernels[gpu]
    if kernels == "none":
        return "none"  # nothing for the GPU, whatever else is missing
    return "blocked" if _blocks(package, gpu, driver) else kernels


def _scan(package: Package, driver: str) -> tuple[dict[str, Any], int]:
    (folder,) = need_data(package.data)
    target = (
        [str(folder / CATBOOST_WHEEL)]
        if package.name == "catboost"
        else ["--python", str(folder / "bin" / "python")]
    )
    gpus = [a for gpu in package.kernels for a in ("--gpu", gpu)]
    result = run_cli("scan", *target, *gpus, "--driver", driver, "--json", timeout=300)
    return json_output(result, "scan"), result.returncode


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_the_listing_is_cuobjdumps(name: str, tmp_path: Path) -> None:
    """The premises of the tables: what cuobjdump lists is what the tables above say, and what
    archgap lists for the library is the same."""
    package = PACKAGES[name]
    tool, library = _cuobjdump(), _library(package, tmp_path)
    if name == "catboost":  # per target: cuobjdump stops at its sm_35 PTX otherwise
        sass = {a: _listing(tool, library, "--list-elf", a)[a] for a in package.sass}
        ptx = {a: _listing(tool, library, "--list-ptx", a)[a] for a in package.ptx}
    else:
        sass = dict(_listing(tool, library, "--list-elf"))
        ptx = dict(_listing(tool, library, "--list-ptx"))
    assert sass == package.sass and ptx == package.ptx
    for arch in (a for a, n in package.ptx.items() if n):
        assert _ptx_isas(tool, library, arch) == {package.ptx_isa}
    if package.cuda13 and package.ptx_isa is None:  # DALI: its cubins' toolkit notes
        assert b"Cuda compilation tools, release 13.4" in library.read_bytes()

    doc = json_output(run_cli("kernels", str(library), "--json", timeout=300), "kernels")
    (listed,) = doc["files"]
    ours: dict[str, Counter[int]] = {"sass": Counter(), "ptx": Counter()}
    for entry in listed["entries"]:
        if entry["listed"]:
            ours[entry["kind"]][entry["arch"]] += entry["count"]
    assert {a: ours["sass"][a] for a in package.sass} == package.sass
    assert {a: ours["ptx"][a] for a in package.ptx} == package.ptx
    if name != "catboost":  # and nothing else, where cuobjdump lists all
        assert +ours["sass"] == Counter(package.sass) and +ours["ptx"] == Counter(package.ptx)


@pytest.mark.parametrize("driver", [NEW, OLD, OLDER])
@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_verdicts_worked_out_by_hand(name: str, driver: str) -> None:
    package = PACKAGES[name]
    doc, code = _scan(package, driver)
    got = {p["gpu"]: p["verdict"] for p in doc["packages"] if p["package"] == name}
    want = {gpu: expected(package, gpu, driver) for gpu in package.kernels}
    assert got == want
    # exit 1 for a gap: a GPU the package cannot run on (none, blocked); jit is no gap
    assert code == (1 if {"none", "blocked"} & set(want.values()) else 0)

    findings = [f for f in doc["load"] if f["package"] in (name, "")]
    cuda13 = [f for f in findings if f["check"] == "driver-cuda"]
    if package.cuda13 and driver != NEW:  # the library's CUDA major from its content
        (finding,) = cuda13
        assert "needs driver >= 580 (CUDA 13" in finding["cause"], finding["cause"]
        assert f"driver {driver} does not run CUDA 13" in finding["cause"]
    else:  # CUDA 12 (faiss) and 11.8 (catboost) run on 535 and 570; CUDA 13 on 580
        assert cuda13 == []
    missing = {
        soname
        for f in findings
        if f["check"] == "needed-library" and f["status"] == "fails"
        for soname in re.findall(r"lib\w+\.so\.\d+", f["chain"][0].split(" needs ", 1)[1])
    }
    assert missing == {n for n in package.lacks if not _loader_finds(n)}


def test_what_faiss_lacks_is_what_its_metadata_requires() -> None:
    """The fixes name the packages faiss's own METADATA requires for the libraries it lacks
    (Requires-Dist: nvidia-cuda-runtime-cu12>=12.1.105, nvidia-cublas-cu12>=12.1.3.1)."""
    package = PACKAGES["faiss-gpu-cu12"]
    (folder,) = need_data(package.data)
    (metadata,) = folder.glob("lib/python*/site-packages/faiss_gpu_cu12-*.dist-info/METADATA")
    required = set(re.findall(r"^Requires-Dist: (nvidia-[\w-]+)>=", metadata.read_text(), re.M))
    assert required == {"nvidia-cuda-runtime-cu12", "nvidia-cublas-cu12"}
    doc, _ = _scan(package, NEW)
    fixes = {f["fix"].removeprefix("pip install ") for f in doc["load"]
             if f["check"] == "needed-library"}  # fmt: skip
    wanted = {
        "nvidia-cuda-runtime-cu12" if "cudart" in n else "nvidia-cublas-cu12"
        for n in package.lacks
        if not _loader_finds(n)
    }
    assert fixes == wanted and wanted <= required


@pytest.mark.parametrize(
    ("name", "gpus", "strict", "failing"),
    [
        # libfaiss: sm_70/sm_80 SASS serve 7.5-8.9; nothing of major 9 and no PTX for H100
        ("faiss-gpu-cu12", ("T4", "RTX 4090", "H100"), False, {"H100": "none"}),
        # _catboost.so: sm_90 SASS for H100; the RTX PRO 6000 only through compute_90 PTX, which
        # passes a gate but not a --strict one (SASS only)
        ("catboost", ("H100", "RTX PRO 6000"), False, {}),
        ("catboost", ("H100", "RTX PRO 6000"), True, {"RTX PRO 6000": "jit"}),
    ],
)
def test_the_ci_gate_on_the_library(
    name: str, gpus: tuple[str, ...], strict: bool, failing: dict[str, str]
) -> None:
    package = PACKAGES[name]
    (folder,) = need_data(package.data)
    if name == "catboost":
        target = str(folder / CATBOOST_WHEEL)
    else:
        (found,) = folder.glob(f"lib/python*/site-packages/{package.library}")
        target = str(found)
    requires = [a for gpu in gpus for a in ("--require", gpu)]
    result = run_cli("kernels", target, *requires, *(["--strict"] if strict else []), "--json",
                     timeout=300)  # fmt: skip
    gate = json_output(result, "kernels")["require"]
    assert {f["gpu"]: f["verdict"] for f in gate["failures"]} == failing
    assert gate["passed"] == (not failing) and result.returncode == (1 if failing else 0)


@pytest.fixture(scope="module")
def member_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """xgboost-cu13's and custatevec-cu13's deciding libraries (87 and 69 MB: over the 64 MiB a
    wheel member is read in memory, so they are streamed) as wheels of one member each, their
    bytes as installed (tests.helpers.member_wheel)."""
    folder = tmp_path_factory.mktemp("member-wheels")
    for name, tag in (("xgboost-cu13", "manylinux_2_28_x86_64"),
                      ("custatevec-cu13", "manylinux2014_x86_64")):  # fmt: skip
        package = PACKAGES[name]
        (venv,) = need_data(package.data)
        (site,) = venv.glob("lib/python*/site-packages")
        (info,) = site.glob("*.dist-info")
        version = info.name.split("-")[1].removesuffix(".dist-info")
        wheel = folder / f"{name.replace('-', '_')}-{version}-py3-none-{tag}.whl"
        member_wheel(site, package.library, info.name, wheel)
    return folder


@pytest.mark.parametrize("driver", [NEW, OLD])
def test_streamed_members_keep_what_decides(member_wheels: Path, driver: str) -> None:
    """Before install, the same cells as installed: the kernels and the CUDA 13 driver floor read
    from the streamed member; libcustatevec's DT_NEEDED cuBLAS 13 is named, as unknown, since a
    wheel's target (its loader, what else is installed there) is not known."""
    result = run_cli("scan", str(member_wheels), "--gpu", "A100", "--gpu", "V100",
                     "--driver", driver, "--json", timeout=300)  # fmt: skip
    doc = json_output(result, "scan")
    got = {(p["package"], p["gpu"]): p["verdict"] for p in doc["packages"]}
    a100 = "native" if driver == NEW else "blocked"  # sm_80 SASS; CUDA 13 needs >= 580
    assert got == {
        ("xgboost-cu13", "A100"): a100, ("xgboost-cu13", "V100"): "none",
        ("custatevec-cu13", "A100"): a100, ("custatevec-cu13", "V100"): "none",
    }  # fmt: skip
    (needed,) = [f for f in doc["load"] if f["check"] == "needed-library"]
    assert needed["package"] == "custatevec-cu13" and needed["status"] == "unknown"
    assert set(re.findall(r"lib\w+\.so\.\d+", needed["chain"][0].split(" needs ", 1)[1])) == {
        "libcublas.so.13", "libcublasLt.so.13"}  # fmt: skip
    floors = {f["package"] for f in doc["load"] if f["check"] == "driver-cuda"}
    assert floors == (set() if driver == NEW else {"xgboost-cu13", "custatevec-cu13"})
