"""GPU facts through a stand-in nvidia-smi at the process boundary and a recorded /proc tree."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from archgap.analysis.scan import choose_targets
from archgap.probe.environment.gpu import probe_gpus
from archgap.probe.environment.system import System
from archgap.probe.facts import Problem
from tests.hangs import Sleeper

FIXTURES = Path(__file__).parent.parent / "fixtures"
SMI = FIXTURES / "nvidia_smi"


def system_with_smi(tmp_path: Path, csv: str, root: str = "/", **extra: str) -> System:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").symlink_to(SMI / "stub-nvidia-smi")
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "NVSMI_CSV": str(SMI / csv),
        "NVSMI_BANNER": str(SMI / csv.replace(".csv", ".banner")),
        **extra,
    }
    # NVSMI_* are not on the allowlist: the stub reads them from the inherited process env.
    os.environ.update({k: v for k, v in env.items() if k.startswith("NVSMI")})
    return System.local(root=root, environ=env)


@pytest.fixture(autouse=True)
def _clean_env() -> Iterator[None]:
    yield
    for key in [k for k in os.environ if k.startswith("NVSMI")]:
        del os.environ[key]


def test_eight_blackwell_gpus(tmp_path: Path) -> None:
    facts = probe_gpus(system_with_smi(tmp_path, "rtx_pro_6000_x8.csv"))
    assert [g.index for g in facts.gpus] == list(range(8))
    assert {g.compute_capability for g in facts.gpus} == {"12.0"}
    assert facts.driver_version == "580.105.06"
    assert facts.driver_cuda_version == "13.0"
    assert facts.problems == ()
    targets = choose_targets(facts, [])
    assert len(targets) == 1  # eight identical GPUs: one target
    assert targets[0].role == "present"
    assert str(targets[0].compute_capability) == "12.0"
    assert "GPU 0,1,2,3,4,5,6,7" in targets[0].label


def test_old_driver_without_compute_cap_is_resolved_by_name(tmp_path: Path) -> None:
    facts = probe_gpus(system_with_smi(tmp_path, "v100_old_driver.csv"))
    assert facts.gpus[0].compute_capability == ""
    (target,) = choose_targets(facts, [])
    assert str(target.compute_capability) == "7.0"


def test_hanging_nvidia_smi_is_cut_off(tmp_path: Path) -> None:
    system = system_with_smi(tmp_path, "rtx_pro_6000_x8.csv")
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.unlink()
    sleeper = Sleeper(tmp_path / "smi")
    sleeper.script(smi)  # a GPU off the bus: nvidia-smi never answers
    facts = probe_gpus(system, timeout=1.0)
    sleeper.assert_cut_short()  # stopped at the timeout, not waited for
    assert facts.gpus == ()
    assert "timed out" in facts.problems[0].reason
    assert len(facts.problems) == 1  # NVML would block as nvidia-smi did: not asked


def test_no_nvidia_smi_falls_back_to_proc_through_the_root_prefix(tmp_path: Path) -> None:
    root = FIXTURES / "roots" / "driver580"
    facts = probe_gpus(System.local(root=str(root), environ={"PATH": str(tmp_path)}))
    assert facts.gpus == ()
    assert facts.driver_version == "580.105.06"
    assert facts.source == "/proc/driver/nvidia/version"
    assert "not found" in facts.problems[0].reason
    # NVML is looked for under the root only (the host's library is not the target's).
    assert facts.problems[1] == Problem("nvml", "libnvidia-ml.so.1 not found")
    # With no GPU found and none named, the default matrix is shown as information.
    assert {t.role for t in choose_targets(facts, [])} == {"matrix"}
