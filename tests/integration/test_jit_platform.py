"""No JIT verdicts for a GPU whose systems the environment cannot run on (issue 38 item 5).

First principles:
- A GB10 (DGX Spark) system's host CPU is aarch64: NVIDIA's DGX Spark specification lists a
  20-core Arm CPU (10 Cortex-X925 + 10 Cortex-A725) beside the GB10's Blackwell GPU
  (https://www.nvidia.com/en-us/products/workstations/dgx-spark/; kb/gpus.json host_cpu).
  Compute capability 12.1 is only that GPU (CUDA C Programming Guide, compute capabilities).
- A JIT build runs in the environment: FlashInfer compiles at first use with the nvcc it finds
  (flashinfer/jit/cpp_ext.py: CUDA_HOME, else `which nvcc`), under the environment's interpreter.
  The test venv's interpreter is an x86-64 ELF (e_machine 62, read below from its header), and so
  is every CUDA toolkit an x86-64 host has: none of it executes on an aarch64 CPU, so what
  FlashInfer would do with it on a GB10 is not a question with an answer: `blocked`, no error
  predicted, no fix (a FLASHINFER_CUDA_ARCH_LIST or a CUDA_HOME for a machine it cannot run on
  fixes nothing).
- An RTX PRO 6000 (12.0) runs in x86-64 servers (no host CPU fixed by the product), so the same
  scan keeps judging it: FlashInfer 0.6.8 with nvcc 12.8 raises "SM 12.x requires CUDA >= 12.9"
  (compilation_context.py), swallowed, then check_cuda_arch() rejects the GPU.
- The default matrix (no GPU present or named) is judged by the same rule: an x86-64 library in
  it is `blocked` on GB10 there too (its ELF machine, from the file), and nothing of the matrix
  gates the exit code.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.analysis.verdicts.platform import jit_blocked
from archgap.probe.facts import BinaryFacts
from tests.helpers import DATA, json_output, need_data, run_cli
from tests.toolkit_stubs import banner_toolkit, venv_python

FLASHINFER = "venv-flashinfer-python-0.6.8"
CURAND = "venv-nvidia-curand-10.4.0.35"
SM75 = "RuntimeError: FlashInfer requires GPUs with sm75 or higher"
EM_X86_64 = 62  # the ELF e_machine of x86-64 (System V ABI, AMD64 supplement)


def elf_machine(path: Path) -> int:
    """e_machine of an ELF file: the half-word at offset 18 (little-endian ELF, EI_DATA 1)."""
    header = path.resolve().read_bytes()[:20]
    assert header[:4] == b"\x7fELF" and header[5] == 1, path
    machine: int = struct.unpack_from("<H", header, 18)[0]
    return machine


def scan(*args: str, cuda_home: Path) -> tuple[int, dict[str, Any]]:
    env = {"CUDA_HOME": str(cuda_home), "CUDA_PATH": "", "PATH": "/usr/bin:/bin"}
    result = run_cli("scan", *args, "--json", env=env)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json_output(result, "scan")


def flashinfer_rows(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["gpu"]: f for f in doc["jit"] if f["package"] == "flashinfer-python"}


def test_a_gb10_gets_no_jit_verdict_or_fix_from_an_x86_64_environment(tmp_path: Path) -> None:
    need_data(FLASHINFER)
    python = venv_python(FLASHINFER)
    assert elf_machine(python) == EM_X86_64  # the environment's interpreter: x86-64
    home = banner_toolkit(tmp_path, "12.8")
    args = ("--python", str(python), "--gpu", "GB10", "--gpu", "RTX PRO 6000")
    code, doc = scan(*args, cuda_home=home)
    rows = flashinfer_rows(doc)
    assert set(rows) == {"GB10", "RTX PRO 6000"}
    gb10 = rows["GB10"]
    assert gb10["status"] == "blocked" and gb10["gates_exit_code"] is True
    assert gb10["error"] is None and gb10["fixes"] == []
    assert "x86-64" in gb10["cause"] and "GB10 systems are aarch64" in gb10["cause"]
    # the GPU the environment can run with is still judged, with its fixes
    pro = rows["RTX PRO 6000"]
    assert pro["status"] == "fails" and pro["error"] == SM75 and pro["fixes"]
    assert code == 1 and doc["gap"] is True
    # GB10 alone: the gap is that the environment cannot run there, and nothing fixes it
    code, doc = scan("--python", str(python), "--gpu", "GB10", cuda_home=home)
    assert code == 1 and [f["status"] for f in flashinfer_rows(doc).values()] == ["blocked"]
    state = tmp_path / "state"
    env = {"CUDA_HOME": str(home), "CUDA_PATH": "", "PATH": "/usr/bin:/bin"}
    fix_args = ("fix", "--python", str(python), "--gpu", "GB10", "--state-dir", str(state))
    result = run_cli(*fix_args, "--json", env=env)
    plan = json_output(result, "fix")
    assert plan["gap"] is True and plan["actions"] == [] and plan["exports"] == []


def test_the_default_matrix_blocks_gb10_for_an_x86_64_environment(tmp_path: Path) -> None:
    """No GPU present or named: the matrix's GB10 column is judged by the platform rule too,
    for the JIT rows and for the libraries; none of it gates the exit code."""
    need_data(FLASHINFER, CURAND)
    home = banner_toolkit(tmp_path, "12.8")
    code, doc = scan("--python", str(venv_python(FLASHINFER)), cuda_home=home)
    rows = flashinfer_rows(doc)
    assert rows["GB10"]["status"] == "blocked" and rows["GB10"]["fixes"] == []
    assert rows["GB10"]["gates_exit_code"] is False
    assert rows["A100"]["status"] == "ok"  # an x86-64 server GPU is judged as before
    assert code == 0  # the matrix is information only
    (lib,) = (DATA / CURAND).glob("lib/python*/site-packages/nvidia/cu*/lib/libcurand.so*")
    assert elf_machine(lib) == EM_X86_64
    code, doc = scan("--python", str(venv_python(CURAND)), cuda_home=home)
    cells = {p["gpu"]: p["verdict"] for p in doc["packages"] if p["package"] == "nvidia-curand"}
    assert cells["GB10"] == "blocked" and cells["A100"] == "native", cells
    assert [(f["gpu"], f["host_cpu"]) for f in doc["platform"]] == [("GB10", "aarch64")]
    assert code == 0


def _file(machine: str) -> BinaryFacts:
    return BinaryFacts(f"/env/lib/{machine}.so", 0, "elf", (), False, machine=machine)


@pytest.mark.parametrize(
    ("files", "uname", "blocked"),
    [
        # a pure-Python environment: the CPU its interpreter ran the probe on decides
        ((), "Linux 6.8.0 x86_64", True),
        ((), "Linux 6.11.0-1016-nvidia aarch64", False),
        # native files decide over the probing machine: what the environment holds is content
        (("aarch64",), "Linux 6.8.0 x86_64", False),
        (("x86-64",), "Linux 6.11.0-1016-nvidia aarch64", True),
        # nothing known of the environment's CPU: no verdict is taken away
        ((), None, False),
    ],
)
def test_which_environment_cpu_blocks_the_jit(
    files: tuple[str, ...], uname: str | None, blocked: bool
) -> None:
    targets = [resolve_gpu("GB10"), resolve_gpu("H100")]
    got = jit_blocked([_file(m) for m in files], targets, uname)
    assert set(got) == ({"GB10"} if blocked else set()), got  # H100: no host CPU fixed
    if blocked:
        assert "GB10 systems are aarch64" in got["GB10"]


def test_a_fleet_naming_gb10_shows_the_jit_blocked_in_its_documents(tmp_path: Path) -> None:
    """fleet --gpu GB10 over an x86-64 host's probe document: its JIT coverage and findings say
    blocked, in a document its schema accepts (json_output validates it)."""
    need_data(FLASHINFER)
    env = {"CUDA_HOME": str(banner_toolkit(tmp_path, "12.8")), "CUDA_PATH": ""}
    probe = run_cli("probe", "--python", str(venv_python(FLASHINFER)), env=env)
    assert probe.returncode == 0, probe.stderr
    document = tmp_path / "host.json"
    document.write_text(probe.stdout)
    result = run_cli("fleet", "--from", str(document), "--gpu", "GB10", "--json")
    doc = json_output(result, "fleet")
    assert result.returncode == 1
    assert [row["statuses"] for row in doc["jit_coverage"]["rows"]] == [["blocked"]]
    ((finding,),) = [host["jit_findings"] for host in doc["hosts"]]
    assert (finding["package"], finding["gpu"], finding["status"]) == (
        "flashinfer-python", "12.1", "blocked",
    )  # fmt: skip
