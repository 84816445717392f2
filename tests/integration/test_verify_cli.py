"""`archgap verify` end to end against a stand-in CUDA driver (there is no GPU here).

``fixtures/cuda_driver/fake_cuda.c`` is built with gcc into a ``libcuda.so.1`` that the verify
child loads through ctypes exactly as it loads NVIDIA's (found on LD_LIBRARY_PATH). It implements
the driver API subset verify calls and chooses device code by NVIDIA's documented rules, so the
child process, the timeout, the error mapping and the comparison with the scan run for real, on
the real binaries built by fixtures/cuda/build.sh. Expectations are written from build.sh's
nvcc command lines and the CUDA Programming Guide's rules (1.3.4, Table 28), never from
archgap's own output.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.hangs import gone
from tests.helpers import (
    CUDA_BIN,
    FIXTURES,
    install_fake_distribution,
    json_output,
    make_venv,
    run_cli,
)

FAKE_CUDA_SOURCE = FIXTURES / "cuda_driver" / "fake_cuda.c"
# k.cu defines two kernels (scale_add, count_positive); nvcc's device-link cubin defines none.
KERNELS = 2


@pytest.fixture(scope="module")
def driver_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding libcuda.so.1 compiled from fake_cuda.c for this test run."""
    gcc = shutil.which("gcc")
    assert gcc is not None, "gcc builds the stand-in libcuda.so.1"
    directory = tmp_path_factory.mktemp("fake-cuda")
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-Wall", "-Werror", "-o", str(directory / "libcuda.so.1"),
         str(FAKE_CUDA_SOURCE), "-ldl"],
        check=True,
    )  # fmt: skip
    return directory


@pytest.fixture(autouse=True)
def _no_inherited_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.startswith("FAKE_CUDA_")]:
        monkeypatch.delenv(name)


def verify(
    driver_dir: Path, *args: str, devices: str = "9.0", **switches: str
) -> subprocess.CompletedProcess[str]:
    env = {
        "LD_LIBRARY_PATH": str(driver_dir),
        "FAKE_CUDA_DEVICES": devices,
        **{f"FAKE_CUDA_{k.upper()}": v for k, v in switches.items()},
    }
    return run_cli("verify", *args, env=env)


def checks(doc: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(Path(c["path"]).name, c["gpu_index"]): c for c in doc["checks"]}


def test_sass_jit_and_nothing_on_a_hopper(driver_dir: Path) -> None:
    libs = [str(CUDA_BIN / n) for n in ("libmix.so", "libptxonly.so", "k_sm86.cubin")]
    result = verify(driver_dir, *libs, "--json", jit_ms="35")
    doc = json_output(result, "verify")
    assert doc["driver"]["cuda_version"] == "13.0"  # cuDriverGetVersion 13000
    assert [(g["index"], g["compute_capability"], g["status"]) for g in doc["gpus"]] == [
        (0, "9.0", "ok")
    ]
    by = checks(doc)
    # libmix.so lists sm_90 SASS: plain sm_90 runs on 9.0. nvcc 13 puts it in two containers
    # (device-link cubin + kernels): both images load, the kernels' one has k.cu's 2 functions.
    mix = by[("libmix.so", 0)]
    assert (mix["observed"], mix["target"], mix["images"], mix["loaded"]) == (
        "native",
        "sm_90",
        2,
        2,
    )
    assert mix["functions"] == KERNELS
    assert mix["predicted"] == "native" and mix["agrees"] is True
    # Offered highest first, as the driver prefers: sm_120, sm_120a, sm_103f, sm_100a are refused
    # (in the first container; the second is not offered a refused target again).
    assert [a["image"].split()[0] for a in mix["attempts"]] == [
        "sm_120",
        "sm_120a",
        "sm_103f",
        "sm_100a",
    ]
    assert {a["error"] for a in mix["attempts"]} == {"CUDA_ERROR_NO_BINARY_FOR_GPU"}
    # Only compute_80 PTX (ISA 9.0): JIT-compiled for 9.0 (>= 8.0) by a CUDA 13.0 driver.
    ptx = by[("libptxonly.so", 0)]
    assert (ptx["observed"], ptx["target"], ptx["predicted"]) == ("jit", "compute_80", "jit")
    assert ptx["jit_ms"] == 35.0  # CU_JIT_WALL_TIME as the driver wrote it
    assert ptx["seconds"] >= 0.035
    # sm_86 SASS never runs on another major.
    cubin = by[("k_sm86.cubin", 0)]
    assert (cubin["observed"], cubin["predicted"]) == ("none", "none")
    assert cubin["attempts"][0]["error"] == "CUDA_ERROR_NO_BINARY_FOR_GPU"
    assert cubin["attempts"][0]["error_text"] == (
        "no kernel image is available for execution on the device"
    )
    assert (doc["agreements"], doc["settled"], doc["disagreements"]) == (3, 3, [])
    assert result.returncode == 1  # a named library (k_sm86.cubin) did not load


def test_every_named_library_loads_exit_zero(driver_dir: Path) -> None:
    # On 8.9: k_sm86.cubin (sm_86 runs on 8.x, x >= 6) natively, libptxonly.so by JIT.
    result = verify(driver_dir, str(CUDA_BIN / "k_sm86.cubin"), str(CUDA_BIN / "libptxonly.so"),
                    devices="8.9")  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 of 2 predictions agree with the driver" in result.stdout
    assert "k_sm86.cubin — sm_86 loaded (1/1 containers, 2 functions)" in result.stdout


def test_ptx_too_new_for_the_driver(driver_dir: Path) -> None:
    # A CUDA 12.8 driver JIT-compiles PTX up to ISA 8.7; nvcc 13.0 wrote ISA 9.0.
    result = verify(driver_dir, str(CUDA_BIN / "libptxonly.so"), "--json", driver_version="12080")
    doc = json_output(result, "verify")
    (check,) = doc["checks"]
    assert (check["predicted"], check["observed"], check["agrees"]) == ("none", "none", True)
    (attempt,) = check["attempts"]
    assert attempt["error"] == "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"
    assert "Unsupported .version 9.0; current version is '8.7'" in attempt["error_log"]
    assert doc["driver"]["ptx_isa"] == "8.7"
    assert result.returncode == 1


def test_a_driver_that_breaks_a_rule_is_a_bug_report(driver_dir: Path) -> None:
    # On 10.3 the scan picks libmix.so's sm_103f SASS (family 103f = {10.3}). This driver refuses
    # it, so the runtime falls back to compute_100f PTX (family {10.0, 10.3}): a disagreement.
    result = verify(driver_dir, str(CUDA_BIN / "libmix.so"), devices="10.3", reject="sm_103f")
    assert result.returncode == 1
    text = result.stdout
    assert "DISAGREE jit (scan: native) libmix.so" in text
    assert "A bug in archgap's rules (ready to file):" in text
    assert "scan predicts `native`, the driver did `jit`" in text
    assert "\n- GPU: NVIDIA B300 SXM6 AC, compute capability 10.3 (GPU 0)\n" in text
    assert "- driver: CUDA 13.0 (cuDriverGetVersion)" in text
    assert "sm_103f SASS in .nv_fatbin at 0x3998: CUDA_ERROR_NO_BINARY_FOR_GPU" in text
    assert "compute_100f (PTX ISA 9.0)" in text  # the file's entries are listed
    assert "0 of 1 predictions agree with the driver · 1 disagreements" in text


def test_each_module_is_unloaded_before_the_next(driver_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    result = verify(driver_dir, str(CUDA_BIN / "libmix.so"), str(CUDA_BIN / "exe_two"), "--json",
                    devices="12.0", log=str(log))  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    exe = checks(json_output(result, "verify"))[("exe_two", 0)]
    # exe_two (-arch=sm_90, two .cu files): the device-link container holds only an sm_90 stub,
    # each kernel container sm_90 SASS + compute_90 PTX. On 12.0 the stub has nothing, the two
    # kernel containers are JIT-compiled.
    assert (exe["observed"], exe["images"], exe["loaded"], exe["empty"]) == ("jit", 3, 2, 1)
    assert exe["predicted"] == "jit" and exe["load_failure"] is False
    lines = log.read_text().splitlines()
    loads = [line for line in lines if line == "load ok 0"]
    # 12.0: libmix.so's sm_120 in both containers; exe_two has SASS sm_90 only, so its two
    # compute_90 PTX images are JIT-compiled.
    assert len(loads) == 4
    for i, line in enumerate(lines):
        if line == "load ok 0":
            assert lines[i + 1] == "unload live 0"  # unloaded before anything else happens


def test_self_loaded_code_is_loaded_until_the_first_image_settles_it(
    driver_dir: Path, tmp_path: Path
) -> None:
    # libhidden_loads.so (build.sh): no .nv_fatbin; a fatbin (SASS sm_86, sm_110f, PTX
    # compute_89) in .rodata and a bare sm_89 cubin in .data, which GNU ld places after .rodata,
    # and an import of cuModuleLoadData: the library loads such code itself, on demand, so one
    # image that loads settles the outcome.
    log = tmp_path / "calls.log"
    result = verify(driver_dir, str(CUDA_BIN / "libhidden_loads.so"), "--json", devices="8.9,9.0",
                    log=str(log))  # fmt: skip
    by = checks(json_output(result, "verify"))
    # 8.9: sm_86 SASS runs on 8.x with x >= 6, and it is first; the sm_89 cubin is not loaded too.
    ada = by[("libhidden_loads.so", 0)]
    assert (ada["observed"], ada["target"], ada["images"], ada["loaded"]) == (
        "native",
        "sm_86",
        2,
        1,
    )
    # 9.0: no SASS of major 9 anywhere, so every container's SASS is refused before any PTX is
    # JIT-compiled: compute_89 (9.0 >= 8.9), once.
    hopper = by[("libhidden_loads.so", 1)]
    assert (hopper["observed"], hopper["target"], hopper["loaded"]) == ("jit", "compute_89", 1)
    assert [a["image"].split()[0] for a in hopper["attempts"]] == ["sm_110f", "sm_86", "sm_89"]
    assert ada["agrees"] is True and hopper["agrees"] is True
    loads = [line for line in log.read_text().splitlines() if line.startswith("load ok")]
    assert len(loads) == 2  # one image per GPU


def test_gpu_choice(driver_dir: Path) -> None:
    lib = str(CUDA_BIN / "libptxonly.so")
    doc = json_output(verify(driver_dir, lib, "--json", devices="9.0,12.0,12.0"), "verify")
    assert [g["index"] for g in doc["gpus"]] == [0, 1]  # one GPU of each model
    doc = json_output(
        verify(driver_dir, lib, "--json", "--gpu-index", "2", devices="9.0,12.0,12.0"), "verify"
    )
    assert [(g["index"], g["name"]) for g in doc["gpus"]] == [
        (2, "NVIDIA RTX PRO 6000 Blackwell Server Edition")
    ]
    result = verify(driver_dir, lib, "--json", "--gpu-index", "5", devices="9.0")
    assert result.returncode == 2
    assert json_output(result, "verify")["problems"] == [
        {"subject": "GPU 5", "reason": "the driver has no GPU 5"}
    ]


def test_a_hanging_driver_is_killed_at_the_timeout(driver_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    libs = [str(CUDA_BIN / "libmix.so"), str(CUDA_BIN / "libptxonly.so")]
    # The fake driver sleeps an hour in cuModuleLoadDataEx: run_cli's 120 s limit is a hang
    # guard, and the loader being gone shows the timeout stopped it.
    result = verify(
        driver_dir, *libs, "--json", "--gpu-timeout", "1", hang="cuModuleLoadDataEx", log=str(log)
    )
    (line,) = log.read_text().splitlines()
    function, pid = line.split()[1:]
    assert function == "cuModuleLoadDataEx"
    assert gone(int(pid))  # the loader was killed, not left asleep
    doc = json_output(result, "verify")
    (gpu,) = doc["gpus"]
    assert gpu["status"] == "timed out"
    assert "while loading" in gpu["error"] and "libmix.so" in gpu["error"]
    assert [(Path(c["path"]).name, c["observed"], c["agrees"]) for c in doc["checks"]] == [
        ("libmix.so", "unknown", None),
        ("libptxonly.so", "unknown", None),
    ]
    assert result.returncode == 1


@pytest.mark.parametrize(
    ("switches", "expected"),
    [
        ({"devices": ""}, "CUDA_ERROR_NO_DEVICE"),  # cuInit: no CUDA-capable device
        ({"init_error": "35"}, "CUDA driver version is insufficient"),
        ({"hang": "cuInit"}, "timed out after 1 s"),
    ],
)
def test_no_gpu_or_driver_exits_2(
    driver_dir: Path, switches: dict[str, str], expected: str
) -> None:
    lib = str(CUDA_BIN / "libmix.so")
    result = verify(driver_dir, lib, "--json", "--gpu-timeout", "1", **switches)
    assert result.returncode == 2
    doc = json_output(result, "verify")
    assert expected in doc["driver"]["error"]
    assert doc["gpus"] == [] and doc["checks"] == []


def test_a_library_that_is_not_the_driver_exits_2(tmp_path: Path) -> None:
    (tmp_path / "libcuda.so.1").write_text("not an ELF file\n")
    result = run_cli("verify", str(CUDA_BIN / "libmix.so"), env={"LD_LIBRARY_PATH": str(tmp_path)})
    assert result.returncode == 2
    assert "no GPU to verify on" in result.stdout and "libcuda.so.1" in result.stdout


def test_an_environment_by_package(driver_dir: Path, tmp_path: Path) -> None:
    site = make_venv(tmp_path / "venv")
    install_fake_distribution(
        site,
        "mixpkg",
        "1.0",
        {
            "mixpkg/libmix.so": CUDA_BIN / "libmix.so",
            "mixpkg/libptxonly.so": CUDA_BIN / "libptxonly.so",
        },
    )
    python = str(tmp_path / "venv" / "bin" / "python")
    result = verify(driver_dir, "--python", python, "--json", devices="7.5")
    doc = json_output(result, "verify")
    by = checks(doc)
    # 7.5: libmix.so has sm_75 SASS; libptxonly.so's compute_80 PTX needs CC >= 8.0.
    assert (by[("libmix.so", 0)]["observed"], by[("libmix.so", 0)]["package"]) == (
        "native",
        "mixpkg",
    )
    assert by[("libptxonly.so", 0)]["observed"] == "none"
    # Every entry is loaded, not a summary of them: libmix.so's two containers (device-link
    # stub and kernels) each give an sm_75 image.
    assert (by[("libmix.so", 0)]["images"], by[("libmix.so", 0)]["loaded"]) == (2, 2)
    assert doc["agreements"] == doc["settled"] == 2
    # In an environment an expected "none" agrees (packages ship arch-specific extras): exit 0.
    assert result.returncode == 0


def test_the_loader_travels_over_a_transport(driver_dir: Path) -> None:
    # --via runs the probe from memory in another interpreter (nothing of archgap installed
    # there): the loader child's source comes from that in-memory package.
    result = verify(driver_dir, "--via", "env", str(CUDA_BIN / "libmix.so"), devices="12.0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "libmix.so — sm_120 loaded (2/2 containers, 2 functions)" in result.stdout


def test_the_python_api(driver_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from archgap.api import verify as api_verify

    monkeypatch.setenv("LD_LIBRARY_PATH", str(driver_dir))
    monkeypatch.setenv("FAKE_CUDA_DEVICES", "12.1")
    report = api_verify([str(CUDA_BIN / "k.fatbin")])
    # k.fatbin: SASS sm_80 and sm_100f, PTX compute_89. On 12.1 (GB10) no SASS runs (other
    # majors; the 100f family is {10.0, 10.3}), and compute_89 PTX is JIT-compiled (12.1 >= 8.9).
    (check,) = report.checks
    assert (check.predicted, check.observed, check.target) == ("jit", "jit", "compute_89")
    assert [a.error for a in check.attempts] == ["CUDA_ERROR_NO_BINARY_FOR_GPU"] * 2
    assert report.agreements == 1 and report.disagreements == ()


def test_ptx_the_driver_cannot_compile_is_a_bug_report(driver_dir: Path, tmp_path: Path) -> None:
    # libptxonly.so's compute_80 entry (header at 0x2058) with its zstd payload damaged: the
    # headers still say compute_80 PTX, so the scan predicts a JIT; the driver cannot compile it.
    damaged = tmp_path / "libptxonly.so"
    data = bytearray((CUDA_BIN / "libptxonly.so").read_bytes())
    header_size = int.from_bytes(data[0x2058 + 4 : 0x2058 + 8], "little")
    payload = 0x2058 + header_size
    assert data[payload : payload + 4] == b"\x28\xb5\x2f\xfd"  # the zstd frame magic
    data[payload + 16 : payload + 64] = bytes(48)
    damaged.write_bytes(bytes(data))
    result = verify(driver_dir, str(damaged), devices="9.0")
    assert result.returncode == 1
    assert "DISAGREE none (scan: jit) libptxonly.so" in result.stdout
    assert "not loaded: compute_80 PTX in .nv_fatbin at 0x2058: CUDA_ERROR_INVALID_PTX" in (
        result.stdout
    )
