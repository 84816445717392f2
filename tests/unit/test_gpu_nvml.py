"""GPU facts through NVML, with a stand-in libnvidia-ml.so.1 built from tests/fixtures/nvml.

There is no GPU here: ``fake_nvml.c`` implements the NVML entry points the probe calls, with
nvml.h's C signatures and recorded values of a 2 x RTX PRO 6000 host. It stands in at the library
boundary only; the probe loads it with ctypes in its child interpreter exactly as it would load
the driver's. Expected values below are the fake's recorded ones (fixtures/nvml/README.md).
"""

import ast
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from archgap.analysis.scan import choose_targets
from archgap.probe.environment import gpu
from archgap.probe.environment.gpu import NVML_QUERY_CODE, cuda_version_text, probe_gpus
from archgap.probe.environment.system import System
from archgap.probe.facts import Gpu, Problem
from tests.hangs import gone
from tests.helpers import vermin

FIXTURES = Path(__file__).parent.parent / "fixtures"
FAKE_NVML_SOURCE = FIXTURES / "nvml" / "fake_nvml.c"
STUB_SMI = FIXTURES / "nvidia_smi" / "stub-nvidia-smi"
PROC_VERSION = FIXTURES / "roots" / "driver580" / "proc" / "driver" / "nvidia" / "version"
BLACKWELL = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
UUID = "GPU-5a1c9e0e-1f4b-4c0e-9d7e-0c6b2d9f0a1%d"


@pytest.fixture(scope="module")
def fake_nvml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """libnvidia-ml.so.1 compiled from fake_nvml.c for this test run."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed: cannot build the stand-in libnvidia-ml.so.1")
    library = tmp_path_factory.mktemp("fake-nvml") / "libnvidia-ml.so.1"
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-Wall", "-Werror", "-o", str(library), str(FAKE_NVML_SOURCE)],
        check=True,
    )
    return library


@pytest.fixture(autouse=True)
def _no_inherited_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.startswith(("FAKE_NVML_", "NVSMI_"))]:
        monkeypatch.delenv(name)


def make_root(
    tmp_path: Path,
    library: Path | None,
    library_dir: str = "/usr/lib/x86_64-linux-gnu",
    driver_loaded: bool = True,
) -> Path:
    """A recorded system tree: NVML in library_dir, the kernel module's /proc version file."""
    root = tmp_path / "root"
    (root / "usr" / "bin").mkdir(parents=True)
    if library is not None:
        directory = root / library_dir.lstrip("/")
        directory.mkdir(parents=True, exist_ok=True)
        shutil.copy(library, directory / "libnvidia-ml.so.1")
    if driver_loaded:
        proc = root / "proc" / "driver" / "nvidia"
        proc.mkdir(parents=True)
        shutil.copy(PROC_VERSION, proc / "version")
    return root


def system_at(root: Path, **env: str) -> System:
    return System.local(root=str(root), environ={"PATH": "/usr/bin:/bin", **env})


def test_nvml_answers_when_nvidia_smi_is_absent(fake_nvml: Path, tmp_path: Path) -> None:
    facts = probe_gpus(system_at(make_root(tmp_path, fake_nvml)))
    assert facts.gpus == (
        Gpu(0, BLACKWELL, UUID % 0, "12.0", "nvml"),
        Gpu(1, BLACKWELL, UUID % 1, "12.0", "nvml"),
    )
    assert facts.driver_version == "580.105.06"
    assert facts.driver_cuda_version == "13.0"  # nvmlSystemGetCudaDriverVersion_v2: 13000
    assert facts.source == "nvml"
    assert facts.problems == (Problem("nvidia-smi", "not found on PATH"),)
    (target,) = choose_targets(facts, [])
    assert (str(target.compute_capability), target.role) == ("12.0", "present")
    assert "GPU 0,1" in target.label


@pytest.mark.parametrize("directory", ["/usr/lib64", "/usr/local/nvidia/lib64"])
def test_nvml_in_the_other_usual_directories(
    fake_nvml: Path, tmp_path: Path, directory: str
) -> None:
    facts = probe_gpus(system_at(make_root(tmp_path, fake_nvml, directory)))
    assert facts.source == "nvml"
    assert len(facts.gpus) == 2


def test_nvml_found_through_the_targets_library_path(fake_nvml: Path, tmp_path: Path) -> None:
    root = make_root(tmp_path, fake_nvml, "/opt/driver/lib")
    facts = probe_gpus(system_at(root, LD_LIBRARY_PATH="/nowhere:/opt/driver/lib"))
    assert facts.source == "nvml"
    assert [g.index for g in facts.gpus] == [0, 1]


def test_failing_init_is_a_problem_with_nvmls_error_text(
    fake_nvml: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NVML_INIT_ERROR", "9")  # NVML_ERROR_DRIVER_NOT_LOADED
    root = make_root(tmp_path, fake_nvml)
    facts = probe_gpus(system_at(root))
    assert facts.gpus == ()
    assert facts.problems[1].subject == "nvml"
    assert facts.problems[1].reason.endswith("nvmlInit_v2: Driver Not Loaded")
    # What the kernel module says still counts.
    assert facts.driver_version == "580.105.06"
    assert facts.source == "/proc/driver/nvidia/version"


def test_a_lost_gpu_is_a_problem_and_the_others_stay(
    fake_nvml: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NVML_LOST_GPU", "0")
    facts = probe_gpus(system_at(make_root(tmp_path, fake_nvml)))
    assert facts.gpus == (Gpu(1, BLACKWELL, UUID % 1, "12.0", "nvml"),)
    assert Problem("nvml GPU 0", "nvmlDeviceGetHandleByIndex_v2: GPU is lost") in facts.problems


@pytest.mark.parametrize("function", ["nvmlInit_v2", "nvmlDeviceGetName"])
def test_a_hanging_nvml_is_cut_off_by_the_timeout(
    fake_nvml: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, function: str
) -> None:
    monkeypatch.setenv("FAKE_NVML_HANG", function)  # sleeps an hour, like a GPU off the bus
    pid_file = tmp_path / "hung.pid"
    monkeypatch.setenv("FAKE_NVML_HANG_PID", str(pid_file))  # the process that hangs, first
    facts = probe_gpus(system_at(make_root(tmp_path, fake_nvml)), timeout=1.0)
    # The query that hung was stopped (an hour asleep otherwise); a query killed before it
    # reached NVML wrote no pid and left nothing behind.
    assert not pid_file.exists() or gone(int(pid_file.read_text()))
    assert facts.gpus == ()
    assert facts.problems[-1].subject == "nvml"
    assert "timed out after 1 s" in facts.problems[-1].reason
    assert facts.driver_version == "580.105.06"  # from /proc


def test_no_library_is_a_problem(tmp_path: Path) -> None:
    facts = probe_gpus(system_at(make_root(tmp_path, None, driver_loaded=False)))
    assert facts.gpus == ()
    assert facts.source == "none"
    assert facts.problems == (
        Problem("nvidia-smi", "not found on PATH"),
        Problem("nvml", "libnvidia-ml.so.1 not found"),
    )


def test_a_library_that_is_not_nvml_is_a_problem(tmp_path: Path) -> None:
    root = make_root(tmp_path, None)
    library = root / "usr" / "lib64" / "libnvidia-ml.so.1"
    library.parent.mkdir(parents=True)
    library.write_bytes(b"\x7fELF truncated")
    facts = probe_gpus(system_at(root))
    assert facts.gpus == ()
    assert facts.problems[-1].reason.startswith(f"cannot load {library}: ")


def link_stub_smi(root: Path, monkeypatch: pytest.MonkeyPatch, hang: bool = False) -> None:
    (root / "usr" / "bin" / "nvidia-smi").symlink_to(STUB_SMI)
    monkeypatch.setenv("NVSMI_CSV", str(FIXTURES / "nvidia_smi" / "rtx_pro_6000_x8.csv"))
    monkeypatch.setenv("NVSMI_BANNER", str(FIXTURES / "nvidia_smi" / "rtx_pro_6000_x8.banner"))
    if hang:
        monkeypatch.setenv("NVSMI_HANG", "1")


def test_nvidia_smi_wins_when_present(
    fake_nvml: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_root(tmp_path, fake_nvml)
    link_stub_smi(root, monkeypatch)
    facts = probe_gpus(system_at(root))
    assert facts.source == "nvidia-smi"
    assert len(facts.gpus) == 8  # the recorded nvidia-smi host, not the fake NVML's two GPUs
    assert {g.source for g in facts.gpus} == {"nvidia-smi"}
    assert facts.problems == ()


def test_failing_nvidia_smi_falls_back_to_nvml(fake_nvml: Path, tmp_path: Path) -> None:
    root = make_root(tmp_path, fake_nvml)
    smi = root / "usr" / "bin" / "nvidia-smi"
    # What nvidia-smi prints, with status 9, when it cannot talk to the driver.
    smi.write_text(
        "#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA"
        ' driver. Make sure that the latest NVIDIA driver is installed and running."\nexit 9\n'
    )
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    facts = probe_gpus(system_at(root))
    assert facts.source == "nvml"
    assert len(facts.gpus) == 2
    assert facts.problems[0].subject == "nvidia-smi"
    assert facts.problems[0].reason.startswith("exited with status 9: NVIDIA-SMI has failed")


def test_nvml_is_not_asked_after_nvidia_smi_timed_out(
    fake_nvml: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_root(tmp_path, fake_nvml)
    link_stub_smi(root, monkeypatch, hang=True)
    facts = probe_gpus(system_at(root), timeout=1.0)
    # nvidia-smi is an NVML client: NVML would block the same way; the fake would have answered.
    assert facts.gpus == ()
    assert [p.subject for p in facts.problems] == ["nvidia-smi"]
    assert "timed out" in facts.problems[0].reason


def test_the_probe_loaded_from_memory_asks_nvml(fake_nvml: Path, tmp_path: Path) -> None:
    # The transport's real path: the probe package sent on stdin, run under `python -I -S`; the
    # NVML child must not need the (file-less) probe package. The prefix sets the target's env.
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    via = f"env PATH={empty_bin} LD_LIBRARY_PATH={fake_nvml.parent}"
    command = [sys.executable, "-m", "archgap", "probe", "--via", via, "--python", sys.executable]
    result = subprocess.run(
        [*command, "--sections", "gpu", "--require", "sm_120", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    gpu = json.loads(result.stdout)["facts"]["sections"]["gpu"]
    assert gpu["source"] == "nvml"
    assert [(g["index"], g["compute_capability"]) for g in gpu["gpus"]] == [
        (0, "12.0"),
        (1, "12.0"),
    ]
    assert gpu["driver_cuda_version"] == "13.0"


def test_the_nvml_child_code_is_python38_and_self_contained(tmp_path: Path) -> None:
    tree = ast.parse(NVML_QUERY_CODE)
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert imported == {"ctypes", "json", "sys"}
    assert not any(isinstance(node, ast.ImportFrom) for node in ast.walk(tree))
    script = tmp_path / "nvml_query.py"
    script.write_text(NVML_QUERY_CODE)
    result = vermin(script)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("number", "text"), [(13000, "13.0"), (12080, "12.8"), (12090, "12.9"), (11020, "11.2")]
)
def test_cuda_driver_version_number(number: int, text: str) -> None:
    # nvml.h: NVML_CUDA_DRIVER_VERSION_MAJOR(v) = v / 1000, _MINOR(v) = (v % 1000) / 10.
    assert cuda_version_text(number) == text


def loader_cache(tmp_path: Path, library_dir: Path) -> Path:
    """A real dynamic-loader cache, written by ldconfig, of ``library_dir`` (and the system's
    trusted directories, which ldconfig always adds)."""
    ldconfig = shutil.which("ldconfig", path="/sbin:/usr/sbin:" + os.environ.get("PATH", ""))
    if ldconfig is None:
        pytest.skip("ldconfig is not installed: cannot write a loader cache")
    conf = tmp_path / "ld.so.conf"
    conf.write_text(f"{library_dir}\n")
    cache = tmp_path / "ld.so.cache"
    subprocess.run([ldconfig, "-X", "-C", str(cache), "-f", str(conf)], check=True)
    return cache


def on_the_real_root(monkeypatch: pytest.MonkeyPatch, cache: Path) -> System:
    """This machine's root with ``cache`` as the loader's cache and none of the usual
    directories (whatever this machine has in them)."""
    monkeypatch.setattr(gpu, "LOADER_CACHE", str(cache))
    monkeypatch.setattr(gpu, "NVML_LIBRARY_DIRS", ())
    monkeypatch.setattr(gpu, "LOADER_DEFAULT_DIRS", ())
    return System.local(root="/", environ={"PATH": str(cache.parent / "no-bin")})


def test_no_child_when_the_loader_cache_does_not_name_nvml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dlopen("libnvidia-ml.so.1") searches LD_LIBRARY_PATH, the cache and the trusted
    directories (ld.so(8)): with none of them holding it, no child interpreter is started to
    learn that the load fails."""
    (tmp_path / "empty").mkdir()
    system = on_the_real_root(monkeypatch, loader_cache(tmp_path, tmp_path / "empty"))
    started: list[list[str]] = []
    real_run = System.run

    def recording_run(self: System, argv: list[str], *args: object, **kwargs: object) -> object:
        started.append(list(argv))
        return real_run(self, argv, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(System, "run", recording_run)
    assert gpu.find_nvml(system) is None
    facts = probe_gpus(system)
    assert Problem("nvml", "libnvidia-ml.so.1 not found") in facts.problems
    assert not [argv for argv in started if gpu.NVML_QUERY_CODE in argv]


def test_a_loader_cache_that_names_nvml_leaves_the_search_to_the_loader(
    fake_nvml: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = on_the_real_root(monkeypatch, loader_cache(tmp_path, fake_nvml.parent))
    assert gpu.find_nvml(system) == "libnvidia-ml.so.1"  # the bare name: dlopen finds it


def test_without_a_readable_loader_cache_the_loader_decides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = on_the_real_root(monkeypatch, tmp_path / "no-such-cache")  # musl has none
    assert gpu.find_nvml(system) == "libnvidia-ml.so.1"
