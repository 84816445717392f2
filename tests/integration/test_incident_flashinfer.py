"""The incident, predicted without a GPU: real flashinfer-python wheels (installed --no-deps by
scripts/testdata, never imported), `archgap scan --gpu ...` through the real CLI, and CUDA_HOME
pointing at a toolkit whose nvcc reports a given release (the real nvcc 13.0 where it exists,
recorded banners for 12.6/12.8/12.9). Expected texts are FlashInfer's own messages, read off
the released files (compilation_context.py / jit/core.py), and nvcc's target tables."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from archgap.analysis.jit.findings import JitFinding
from archgap.analysis.scan import ScanReport, report_from_facts
from archgap.probe.collect import collect
from archgap.probe.environment.system import System
from archgap.probe.facts import ProbeResponse
from archgap.request import DEFAULT_SECTIONS, probe_request
from tests.helpers import json_output, run_cli
from tests.toolkit_stubs import (
    REAL_CUDA_13,
    banner_toolkit,
    toolkit,
    venv_python,
    wait_for_exec,
)

SM75_0_6 = "RuntimeError: FlashInfer requires GPUs with sm75 or higher"
SM75_0_7 = (
    "RuntimeError: FlashInfer requires GPUs with sm75 or higher. Detected TARGET_CUDA_ARCHS=[]."
)


def flashinfer(version: str) -> Path:
    python = venv_python(f"venv-flashinfer-python-{version}")
    if not python.exists():
        pytest.skip("scripts/testdata has not installed the flashinfer wheels")
    return python


def scan(
    version: str, gpu: str, cuda_home: Path, *extra: str, shell: dict[str, str] | None = None
) -> tuple[int, list[dict[str, Any]], dict[str, Any]]:
    env = shell if shell is not None else {"CUDA_HOME": str(cuda_home)}
    result = run_cli(
        "scan", "--python", str(flashinfer(version)), "--gpu", gpu, "--json", *extra, env=env
    )
    doc = json_output(result, "scan")
    jit = [f for f in doc["jit"] if f["package"] == "flashinfer-python"]
    return result.returncode, jit, doc


# What the probe reports as its platform (os.uname: sysname, release, machine) on an aarch64
# host, as a GB10's (DGX Spark: a 20-core Arm CPU) own probe sends it.
ARM_HOST = "Linux 6.11.0-1016-nvidia aarch64"


def scan_on_arm(version: str, gpu: str, env: dict[str, str]) -> tuple[ScanReport, list[JitFinding]]:
    """The environment's facts as the probe collects them (the shell ``env``), judged as the
    probe of an aarch64 host would send them: FlashInfer's wheel is pure Python, so its rules
    for a GB10 are judged where a GB10 runs them (on this x86-64 machine they are blocked)."""
    request = probe_request(DEFAULT_SECTIONS, str(flashinfer(version)))
    facts = json.loads(json.dumps(collect(request, System.local(environ={**os.environ, **env}))))
    assert facts["platform"].split()[-1] == "x86_64" and not facts["sections"]["binaries"]
    facts["platform"] = ARM_HOST
    report = report_from_facts(ProbeResponse(**facts), [gpu])
    return report, [f for f in report.jit if f.package == "flashinfer-python"]


def needs_13(version: str) -> None:
    if version == "13.0" and not (REAL_CUDA_13 / "bin/nvcc").exists():
        pytest.skip("no real nvcc 13.0 on this machine")


def test_rtx_pro_6000_with_nvcc_12_8_predicts_the_sm75_error(tmp_path: Path) -> None:
    home = banner_toolkit(tmp_path, "12.8")
    code, (finding,), doc = scan("0.6.8", "RTX PRO 6000", home)
    assert code == 1 and doc["gap"] is True
    assert finding["status"] == "fails" and finding["compute_capability"] == "12.0"
    assert finding["error"] == SM75_0_6
    assert "SM 12.x requires CUDA >= 12.9" in finding["cause"]
    sources = {c["what"]: c["source"] for c in finding["chain"]}
    assert sources[f"CUDA_HOME={home}"] == "env CUDA_HOME (shell)"
    assert any(s == f"`{home}/bin/nvcc --version`" for s in sources.values())
    assert any(s.endswith("flashinfer/compilation_context.py:56") for s in sources.values())
    assert any(s.endswith("flashinfer/compilation_context.py:80") for s in sources.values())
    actions = [f["action"] for f in finding["fixes"]]
    assert any(a.startswith('export FLASHINFER_CUDA_ARCH_LIST="12.0a"') for a in actions)
    assert "upgrade flashinfer-python to >= 0.7.1" in actions
    if (REAL_CUDA_13 / "bin/nvcc").exists():
        assert any(a.startswith(f"point CUDA_HOME at {REAL_CUDA_13} (nvcc 13.0") for a in actions)


@pytest.mark.parametrize("nvcc", ["12.9", "13.0"])
def test_rtx_pro_6000_with_new_enough_nvcc_has_no_finding(tmp_path: Path, nvcc: str) -> None:
    needs_13(nvcc)
    code, jit, _ = scan("0.6.8", "RTX PRO 6000", toolkit(tmp_path, nvcc))
    # checked and works, said so: 0.6.8 normalises 12.0 to compute_120f with CUDA >= 12.9
    assert [(f["status"], f["gpu"]) for f in jit] == [("ok", "RTX PRO 6000")] and code == 0
    assert (
        f"flashinfer-python 0.6.8 on RTX PRO 6000: builds compute_120f with nvcc {nvcc}"
        in (jit[0]["cause"])
    )


def test_0_7_1_accepts_12_8_and_rejects_12_6(tmp_path: Path) -> None:
    code, jit, _ = scan("0.7.1", "RTX PRO 6000", banner_toolkit(tmp_path, "12.8"))
    assert [f["status"] for f in jit] == ["ok"] and code == 0
    assert "builds compute_120a with nvcc 12.8" in jit[0]["cause"]  # 0.7.1: 12.8 -> 120a
    code, (finding,), _ = scan("0.7.1", "RTX PRO 6000", banner_toolkit(tmp_path, "12.6"))
    assert code == 1 and finding["error"] == SM75_0_7
    assert "SM 120 requires CUDA >= 12.8" in finding["cause"]


def test_gb10(tmp_path: Path) -> None:
    home = {"CUDA_HOME": str(banner_toolkit(tmp_path, "12.8"))}
    _, (old,) = scan_on_arm("0.6.8", "GB10", home)
    assert old.error == SM75_0_6 and old.compute_capability == "12.1"
    _, (new,) = scan_on_arm("0.7.1", "GB10", home)
    assert new.error == SM75_0_7 and "SM 12.1+ requires CUDA >= 12.9" in new.cause
    # 12.1a needs nvcc 12.9: no FLASHINFER_CUDA_ARCH_LIST fix exists with nvcc 12.8.
    assert new.fixes and not any("FLASHINFER_CUDA_ARCH_LIST" in f.action for f in new.fixes)


def test_b300_arch_set_fine_but_nvcc_12_8_cannot_build_compute_103a(tmp_path: Path) -> None:
    code, (finding,), _ = scan("0.6.8", "B300", banner_toolkit(tmp_path, "12.8"))
    assert code == 1
    assert finding["error"] == "nvcc fatal   : Unsupported gpu architecture 'compute_103a'"
    assert "arch set is fine" in finding["cause"] and "12.9" in finding["cause"]
    _, jit, _ = scan("0.6.8", "B300", banner_toolkit(tmp_path, "12.9"))
    assert [f["status"] for f in jit] == ["ok"] and "builds compute_103a" in jit[0]["cause"]


def test_env_from_file_overrides_the_shell(tmp_path: Path) -> None:
    old = banner_toolkit(tmp_path, "12.8")
    good = banner_toolkit(tmp_path, "12.9")
    env_file = tmp_path / "sglang.env"
    env_file.write_text(f"# systemd EnvironmentFile\nexport CUDA_HOME={old}\nPATH=/usr/bin:/bin\n")
    shell = {"CUDA_HOME": str(good)}
    # The shell alone would be fine ...
    _, jit, _ = scan("0.6.8", "RTX PRO 6000", good, shell=shell)
    assert [f["status"] for f in jit] == ["ok"]
    # ... but the service runs with the env file's CUDA_HOME.
    code, (finding,), doc = scan(
        "0.6.8", "RTX PRO 6000", old, "--env-from", str(env_file), shell=shell
    )
    assert code == 1 and finding["error"] == SM75_0_6
    assert doc["toolchains"]["env_source"] == str(env_file)
    sources = {c["what"]: c["source"] for c in finding["chain"]}
    assert sources[f"CUDA_HOME={old}"] == f"env CUDA_HOME ({env_file})"


def test_env_from_pid_of_a_running_service(tmp_path: Path) -> None:
    old = banner_toolkit(tmp_path, "12.8")
    good = banner_toolkit(tmp_path, "12.9")
    service = subprocess.Popen(
        ["sleep", "60"], env={"CUDA_HOME": str(old), "PATH": os.environ.get("PATH", "/usr/bin")}
    )
    try:
        wait_for_exec(service.pid)
        code, (finding,), doc = scan(
            "0.6.8",
            "RTX PRO 6000",
            old,
            "--env-from",
            str(service.pid),
            shell={"CUDA_HOME": str(good)},
        )
    finally:
        service.kill()
        service.wait()
    assert code == 1 and finding["error"] == SM75_0_6
    assert doc["toolchains"]["env_source"] == f"/proc/{service.pid}/environ"


def test_hanging_nvcc_does_not_hang_the_scan(tmp_path: Path) -> None:
    from tests.toolkit_stubs import hanging_toolkit

    home = hanging_toolkit(tmp_path)
    result = run_cli(
        "scan",
        "--python",
        str(flashinfer("0.6.8")),
        "--gpu",
        "B200",
        "--json",
        env={"CUDA_HOME": str(home)},
        timeout=60,
    )
    doc = json_output(result, "scan")
    tk = next(t for t in doc["toolchains"]["toolkits"] if t["found_by"] == "CUDA_HOME")
    assert tk["status"] == "timeout"
    (finding,) = [f for f in doc["jit"] if f["package"] == "flashinfer-python"]
    assert "never returns" in finding["cause"]


def test_bad_env_from_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli("scan", "--gpu", "B200", "--env-from", str(tmp_path / "nope.env"))
    assert result.returncode == 2 and "nope.env" in result.stderr


def test_rules_per_release_read_off_each_wheel(tmp_path: Path) -> None:
    """Each release's compilation_context.py (read from the 0.6.6, 0.6.7 and 0.6.8 wheels):
    0.6.7 normalises every SM 12.x to compute_120f on CUDA >= 12.9 (its docstring: "This covers
    both SM 12.0 and SM 12.1"); 0.6.8 keeps the minor (12.1 -> compute_121a); 0.5.0-0.6.6 add
    FLASHINFER_CUDA_ARCH_LIST entries as written (no suffix appended, no version check)."""
    nvcc_129 = {"CUDA_HOME": str(banner_toolkit(tmp_path, "12.9"))}
    nvcc_128 = banner_toolkit(tmp_path, "12.8")
    _, (v067,) = scan_on_arm("0.6.7", "GB10", nvcc_129)
    assert v067.status == "ok" and "builds compute_120f with nvcc 12.9" in v067.cause
    _, (v068,) = scan_on_arm("0.6.8", "GB10", nvcc_129)
    assert v068.status == "ok" and "builds compute_121a with nvcc 12.9" in v068.cause
    shell = {"CUDA_HOME": str(nvcc_128), "FLASHINFER_CUDA_ARCH_LIST": "12.0"}
    _, (v066,) = scan_on_arm("0.6.6", "GB10", shell)
    # compute_120 (plain) SASS runs on 12.1 and nvcc 12.8 builds it
    assert v066.status == "ok" and "builds compute_120 with nvcc 12.8" in v066.cause
    report, (v068_list,) = scan_on_arm("0.6.8", "GB10", shell)
    # 0.6.8 normalises the unsuffixed entry like a detected GPU: it raises at import
    assert (
        report.exit_code == 1 and v068_list.error == "RuntimeError: SM 12.x requires CUDA >= 12.9"
    )


def test_gpu_below_sm75_is_unsupported_whatever_the_toolkit(tmp_path: Path) -> None:
    # check_cuda_arch() (jit/core.py) rejects every GPU below sm75; CUDA 13 also dropped sm_70.
    code, (finding,), _ = scan("0.6.8", "V100", toolkit(tmp_path, "13.0"))
    assert code == 1 and finding["error"] == SM75_0_6
    assert "does not support sm_70" in finding["cause"]
    assert [f["action"].split(" (")[0] for f in finding["fixes"]] == [
        "FlashInfer 0.6.8 does not support sm_70; avoid its paths"
    ]
