"""The load model (docs/load-model.md) on real libraries: a verdict is native only if it loads.

Expectations, from first principles:
- `readelf -d` of bitsandbytes 0.50.2's libbitsandbytes_cuda130.so: NEEDED libcudart.so.13,
  libcublas.so.13, libcublasLt.so.13, librt.so.1, libpthread.so.0, libdl.so.2,
  libstdc++.so.6, libm.so.6, libgcc_s.so.1, libc.so.6; RUNPATH
  /usr/local/cuda-13.0/targets/x86_64-linux/lib. Of build.sh's libmix.so (nvcc 13.0,
  -cudart shared): NEEDED libcudart.so.13, libstdc++.so.6, libgcc_s.so.1, libc.so.6; no RUNPATH.
- NVIDIA's CUDA 13.2.2 release notes, Table 2: CUDA 13.x runs on drivers >= 580; 12.x >= 525.
- NVIDIA's CUDA Toolkit, Driver, and Architecture Matrix: Blackwell (10.0, 12.0) first in CUDA
  12.8, whose GA driver minimum is 570.26 (Table 3); Hopper (9.0) first in CUDA 11.8 (520.61.05);
  Volta's last driver branch is R580.
- bitsandbytes 0.50.2 cextension.py get_cuda_bnb_library_path (lines 38-51): BNB_CUDA_VERSION
  names the one build it loads; without it, torch.version.cuda's build, else the highest of the
  same major below it (lines 62-64), else the lowest above it (65-68), never another major
  (69-72).
- ld.so(8): a DT_NEEDED name is found in RUNPATH, LD_LIBRARY_PATH, /etc/ld.so.cache or the
  trusted directories; the loader caches here are written by ldconfig.
"""

from __future__ import annotations

import json
import mmap
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from archgap.analysis.scan import report_from_facts
from archgap.probe.binary.elf import ELF64_HEADER, dynamic_needs
from archgap.probe.collect import collect
from archgap.probe.environment import loader as loader_probe
from archgap.probe.environment.system import System
from archgap.probe.facts import ProbeResponse
from tests.helpers import DATA, need_data

BIN = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"
BNB = DATA / "venv-bitsandbytes-0.50.2"
SYSTEM_LIBS = ("librt.so.1", "libpthread.so.0", "libdl.so.2", "libstdc++.so.6", "libm.so.6",
               "libgcc_s.so.1", "libc.so.6")  # fmt: skip


def bnb_file(name: str) -> Path:
    need_data(BNB.name)
    (found,) = BNB.glob(f"lib/python*/site-packages/bitsandbytes/{name}")
    return found


def needs(path: Path) -> tuple[tuple[str, ...], ...]:
    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        return dynamic_needs(buf, len(buf), ELF64_HEADER.unpack(buf[:64]))


def test_the_dynamic_section_reads_as_readelf_shows_it() -> None:
    assert needs(bnb_file("libbitsandbytes_cuda130.so")) == (
        ("libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", *SYSTEM_LIBS),
        ("/usr/local/cuda-13.0/targets/x86_64-linux/lib",),
    )
    assert needs(BIN / "libmix.so") == (
        ("libcudart.so.13", "libstdc++.so.6", "libgcc_s.so.1", "libc.so.6"),
        (),
    )


def loader_cache(tmp_path: Path) -> Path:
    """A real cache of the loader, written by ldconfig: the trusted directories only."""
    ldconfig = shutil.which("ldconfig", path="/sbin:/usr/sbin")
    assert ldconfig is not None, "ldconfig (libc-bin) is part of every Debian system"
    (tmp_path / "ld.so.conf").write_text("")
    cache = tmp_path / "ld.so.cache"
    subprocess.run([ldconfig, "-C", str(cache), "-f", str(tmp_path / "ld.so.conf")], check=True)
    return cache


@pytest.fixture
def bnb_facts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The probe's facts of the bitsandbytes environment with BNB_CUDA_VERSION=130, on a
    machine whose loader knows only its trusted directories and that has no CUDA toolkit."""
    need_data(BNB.name)
    monkeypatch.setattr(loader_probe, "LOADER_CACHE", str(loader_cache(tmp_path)))
    monkeypatch.setattr(loader_probe, "TOOLKITS", str(tmp_path / "no-toolkits"))
    python = str(BNB / "bin" / "python")
    request = {
        "python": {"python": python},
        "toolchains": {"python": python},
        "binaries": {"of_python": True, "deep": False, "detail": False},
        "loader": {},
    }
    environ = {"PATH": "/usr/bin:/bin", "BNB_CUDA_VERSION": "130"}
    facts = collect(request, System.local(environ=environ))
    sent: dict[str, Any] = json.loads(json.dumps(facts))  # as a remote probe sends them
    return sent


def judge(facts: dict[str, Any], gpus: list[str], driver: str) -> Any:
    return report_from_facts(ProbeResponse(**facts), gpus, driver=driver)


def test_a_cuda_13_build_needs_a_580_driver(bnb_facts: dict[str, Any]) -> None:
    report = judge(bnb_facts, ["H100"], "570.124.06")
    (package,) = report.packages
    by_name = {lib.path.rsplit("/", 1)[-1]: lib for lib in package.libraries}
    picked = by_name["libbitsandbytes_cuda130.so"]
    # BNB_CUDA_VERSION=130: that build alone is loaded; the others are shown, not counted
    assert picked.role == "kernel library"
    assert {lib.role for n, lib in by_name.items() if n != picked.path.rsplit("/", 1)[-1]} == {
        "not loaded"
    }
    assert picked.verdict == "blocked" and "CUDA 13" in picked.load
    assert package.verdict == "blocked" and package.reason.startswith("nothing loads on 9.0")
    (driver,) = [f for f in report.load if f.check == "driver-cuda"]
    assert driver.status == "fails" and driver.package == "bitsandbytes"
    assert [p.rsplit("/", 1)[-1] for p in driver.libraries] == ["libbitsandbytes_cuda130.so"]
    assert "driver >= 580" in driver.fix and "Table 2" in driver.source
    assert report.has_gap

    newer = judge(bnb_facts, ["H100"], "580.95.05")
    assert not [f for f in newer.load if f.check == "driver-cuda"]


def test_needed_cuda_libraries_no_package_or_loader_gives_are_gaps(
    bnb_facts: dict[str, Any],
) -> None:
    report = judge(bnb_facts, ["H100"], "580.95.05")
    missing = {f.fix: f for f in report.load if f.check == "needed-library"}
    # the picked build's CUDA libraries, each named with the package that ships it; the
    # system's own (libc, libstdc++) are in the trusted directories' cache
    assert sorted(missing) == ["pip install nvidia-cublas", "pip install nvidia-cuda-runtime"]
    assert all(f.status == "fails" and f.gates_exit_code for f in missing.values())
    assert "libcublas.so.13, libcublasLt.so.13" in missing["pip install nvidia-cublas"].cause
    (package,) = report.packages
    assert package.verdict == "blocked"  # its kernels run on 9.0 once those are installed
    assert report.has_gap


def test_a_driver_older_than_the_gpu_runs_nothing_there(bnb_facts: dict[str, Any]) -> None:
    report = judge(bnb_facts, ["B200", "RTX PRO 6000", "H100"], "535.104.05")
    by_gpu = {f.gpu: f for f in report.load if f.check == "driver-gpu"}
    assert sorted(by_gpu) == sorted(g.label for g in report.gpus if g.label != "H100")
    for finding in by_gpu.values():
        assert finding.status == "fails" and ">= 570.26" in finding.fix
        assert "cuda-toolkit-driver-and-architecture-matrix" in finding.source
    for package in report.packages:
        if package.gpu in by_gpu:
            assert package.verdict == "blocked" and "Blackwell's first driver" in package.reason


def test_a_branch_named_alone_runs_the_gpus_it_came_with(bnb_facts: dict[str, Any]) -> None:
    """`--driver 570`: an R570 driver. Blackwell came with CUDA 12.8, whose GA minimum 570.26 is
    an R570 release (NVIDIA's Table 3), so the branch runs it; R560 does not."""
    on_570 = judge(bnb_facts, ["B200", "RTX PRO 6000"], "570").load
    assert not [f for f in on_570 if f.check == "driver-gpu"]
    on_560 = judge(bnb_facts, ["B200", "RTX PRO 6000"], "560").load
    assert sorted(f.gpu for f in on_560 if f.check == "driver-gpu") == ["B200", "RTX PRO 6000"]


def test_a_driver_newer_than_the_last_branch_of_the_gpu(bnb_facts: dict[str, Any]) -> None:
    (finding,) = [f for f in judge(bnb_facts, ["V100"], "590.44.01").load if f.gpu]
    assert finding.check == "driver-gpu" and "R580" in finding.cause


@pytest.mark.parametrize(
    ("torch_cuda", "picked"),
    [
        ("12.8", "libbitsandbytes_cuda128.so"),  # its own build
        ("12.9", "libbitsandbytes_cuda128.so"),  # the highest 12.x below 12.9 (lines 62-64)
        ("12.0", "libbitsandbytes_cuda121.so"),  # none below: the lowest 12.x above (65-68)
        ("13.1", "libbitsandbytes_cuda130.so"),
        ("10.2", None),  # no 10.x build: it loads nothing (lines 69-72)
    ],
)
def test_bitsandbytes_loads_the_build_for_torchs_cuda(torch_cuda: str, picked: str | None) -> None:
    from archgap.analysis.verdicts.compat import resolve_gpu
    from archgap.analysis.verdicts.load import load_model
    from archgap.probe.binary.fatbin import read_binary
    from archgap.probe.facts import Distribution, PythonEnvironment, ToolchainFacts, TorchBuild

    builds = sorted(bnb_file("libbitsandbytes_cuda130.so").parent.glob("libbitsandbytes_cuda*.so"))
    binaries = [read_binary(str(p)) for p in builds]
    dist = Distribution("bitsandbytes", "0.50.2", "", tuple(b.path for b in binaries))
    env = PythonEnvironment("python", "3.11", (), (dist,), ())
    torch = TorchBuild(f"2.9.0+cu{torch_cuda.replace('.', '')}", torch_cuda, "torch/version.py")
    toolchains = ToolchainFacts("shell", (), None, (), (), torch, (), ())
    model = load_model(env, binaries, [resolve_gpu("H100")], None, "", None, toolchains)
    loaded = sorted(p.rsplit("/", 1)[-1] for p in dist.native_files if p not in model.not_loaded)
    if picked is not None:
        assert loaded == [picked]
        assert not [f for f in model.findings if f.check == "picked-build"]
    else:
        (finding,) = [f for f in model.findings if f.check == "picked-build"]
        assert finding.status == "fails" and "libbitsandbytes_cuda102.so" in finding.cause


# torchao 0.18.0 (torchao/__init__.py lines 51-99): a release loads its _C*.so extensions
# (_C_cutlass_90a.abi3.so and _C_mxfp8...so, its RECORD lists) only with torch >= 2.11.0, and
# otherwise goes on without them. torch itself (2 GB) is not installed: its version.py facts
# are given as the toolchain section would read them.
TORCHAO = DATA / "venv-torchao-0.18.0"


@pytest.fixture
def torchao_facts() -> dict[str, Any]:
    python = str(TORCHAO / "bin" / "python")
    need_data(TORCHAO.name)
    request = {
        "python": {"python": python},
        "toolchains": {"python": python},
        "binaries": {"of_python": True, "deep": False, "detail": False},
    }
    facts = collect(request, System.local(environ={"PATH": "/usr/bin:/bin"}))
    sent: dict[str, Any] = json.loads(json.dumps(facts))
    return sent


def with_torch(facts: dict[str, Any], version: str | None) -> dict[str, Any]:
    torch = {"version": version, "cuda": "12.8", "file": "torch/version.py"} if version else None
    toolchains = {**facts["sections"]["toolchains"], "torch": torch}
    return {**facts, "sections": {**facts["sections"], "toolchains": toolchains}}


@pytest.mark.parametrize(
    ("torch", "status"), [("2.9.0+cu128", "fails"), ("2.11.0+cu128", None), (None, "unknown")]
)
def test_torchao_loads_its_extensions_only_with_a_new_enough_torch(
    torchao_facts: dict[str, Any], torch: str | None, status: str | None
) -> None:
    report = judge(with_torch(torchao_facts, torch), ["H100"], "580.95.05")
    gates = [f for f in report.load if f.check == "extension-gate"]
    assert [f.status for f in gates] == ([status] if status else [])
    (package,) = [p for p in report.packages if p.package == "torchao"]
    roles = {lib.path.rsplit("/", 1)[-1]: lib.role for lib in package.libraries}
    if status == "fails":
        assert set(roles.values()) == {"not loaded"} and package.verdict == "no-kernels"
        assert gates[0].fix.startswith("pip install 'torch>=2.11.0'")
        assert not gates[0].gates_exit_code  # it imports without them
    else:
        assert "not loaded" not in roles.values()


def test_a_cuda_13_wheel_with_a_static_runtime_needs_a_580_driver() -> None:
    # nvidia-curand 10.4.0.35 installs nvidia/cu13/lib/libcurand.so.10 (its RECORD), whose
    # DT_NEEDED (readelf -d) names no libcudart: the runtime is linked in, and it is CUDA 13's.
    # Its content says so before its path does: its PTX is ISA 9.0 (cuobjdump --list-ptx),
    # which CUDA 13.0 introduced (the PTX ISA's release history).
    (venv,) = need_data("venv-nvidia-curand-10.4.0.35")
    python = str(venv / "bin" / "python")
    request = {"python": {"python": python}, "binaries": {"of_python": True, "deep": False}}
    facts = json.loads(json.dumps(collect(request, System.local(environ={"PATH": "/bin"}))))
    old = judge(facts, ["H100"], "575.57.08")
    (finding,) = [f for f in old.load if f.check == "driver-cuda"]
    assert finding.package == "nvidia-curand"
    assert "needs driver >= 580 (CUDA 13: its PTX is ISA 9.0" in finding.cause
    assert [p.verdict for p in old.packages] == ["blocked"]  # its sm_90 SASS runs on 580
    new = judge(facts, ["H100"], "580.65.06")
    assert not new.load and [p.verdict for p in new.packages] == ["native"]
