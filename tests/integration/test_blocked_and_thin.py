"""Two verdict words on real NVIDIA libraries, in text, JSON, Prometheus and NFD outputs.

``blocked`` (kernels for the GPU, but it cannot load there) is not ``none`` (nothing for the GPU):
cuFFT 12.0 (nvidia-cufft 12.0.0.61, the cuFFT torch 2.14.1+cu130 pins) is a CUDA 13 library, and
NVIDIA's minor-version compatibility (CUDA Toolkit release notes, Table 2) needs a driver >= 580
for CUDA 13.x. Its kernels (in ``.ldata``: SASS sm_75..sm_120, issue 38) serve an A100 (8.0), so
on a 570 driver it is blocked there and runs on 580; CUDA 13 dropped Volta (CUDA 13.0 release
notes: Maxwell, Pascal and Volta are no longer supported), so a V100 (7.0) gets nothing from it
whatever the driver: none.

``partial`` for a library that serves a GPU with a tiny fraction of its modules: cuSPARSELt 0.10.0
(nvidia-cusparselt-cu13) lists SM 8.0, 8.6, 8.7, 9.0, 10.0, 10.3, 11.0, 12.0, 12.1 in its support
matrix (its PyPI page, "Support SM arch"), not 7.5; its listed fatbin still holds one sm_75
cubin among 1,128 (cuobjdump --list-elf) and two compute_75 PTX (--list-ptx).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import zipfile
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import CUDA_BIN, ROOT, json_output, need_data, run_cli

OLD, NEW = "570.124.06", "580.65.06"  # R570 runs CUDA up to 12.8, R580 CUDA 13.0 (Table 2)


def _cufft_python() -> str:
    (venv,) = need_data("venv-nvidia-cufft-12.0.0.61")
    return str(venv / "bin" / "python")


def _promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is not installed (Debian's prometheus package; scripts/services)"
    return found


def test_a_cuda_13_library_on_a_570_driver_is_blocked_where_it_has_kernels() -> None:
    python = _cufft_python()
    result = run_cli("scan", "--python", python, "--gpu", "A100", "--gpu", "V100",
                     "--driver", OLD, "--json")  # fmt: skip
    doc = json_output(result, "scan")  # validated against scan.schema.json
    verdicts = {p["gpu"]: p for p in doc["packages"] if p["package"] == "nvidia-cufft"}
    assert verdicts["A100"]["verdict"] == "blocked", verdicts["A100"]
    assert "driver >= 580" in verdicts["A100"]["reason"]
    assert verdicts["V100"]["verdict"] == "none", verdicts["V100"]
    (cufft,) = [lib for lib in verdicts["A100"]["libraries"] if lib["path"].endswith("cufft.so.12")]
    assert cufft["verdict"] == "blocked" and "driver >= 580" in cufft["load"]
    (old,) = [lib for lib in verdicts["V100"]["libraries"] if lib["path"].endswith("cufft.so.12")]
    assert old["verdict"] == "none"  # another build, whatever driver: not blocked
    assert result.returncode == 1 and doc["gap"]
    # the same library on a driver that runs CUDA 13: its kernels decide alone
    newer = json_output(
        run_cli("scan", "--python", python, "--gpu", "A100", "--gpu", "V100", "--driver", NEW,
                "--json"), "scan")  # fmt: skip
    now = {p["gpu"]: p["verdict"] for p in newer["packages"] if p["package"] == "nvidia-cufft"}
    assert now == {"A100": "native", "V100": "none"}


def test_blocked_in_the_text_health_prometheus_and_nfd_outputs(tmp_path: Path) -> None:
    python = _cufft_python()
    args = ("scan", "--python", python, "--driver", OLD)
    text = run_cli(*args, "--gpu", "A100", "--gpu", "V100")
    assert re.search(r"nvidia-cufft\s+12\.0\.0\.61\s+blocked\s+none", text.stdout), text.stdout
    # the health line: a package with no kernel first (none ranks before blocked), then blocked
    both = run_cli(*args, "--gpu", "A100", "--gpu", "V100", "--health")
    assert both.stdout.startswith("archgap: no-kernel: nvidia-cufft 12.0.0.61 on 7.0 (V100)")
    alone = run_cli(*args, "--gpu", "A100", "--health")
    assert alone.returncode == 1
    assert alone.stdout.startswith("archgap: blocked: nvidia-cufft 12.0.0.61 on 8.0 (A100): ")

    prom, features = tmp_path / "node.prom", tmp_path / "features"
    result = run_cli(*args, "--gpu", "A100", "--gpu", "V100", "--prometheus", str(prom),
                     "--nfd", str(features))  # fmt: skip
    assert result.returncode == 1, result.stderr
    checked = subprocess.run([_promtool(), "check", "metrics"], input=prom.read_text(),
                             capture_output=True, text=True, check=False)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    verdicts = {
        (s.labels["gpu"], s.labels["verdict"])
        for f in text_string_to_metric_families(prom.read_text())
        for s in f.samples
        if s.name == "archgap_package_verdict" and s.labels["package"] == "nvidia-cufft"
    }
    assert verdicts == {("8.0", "blocked"), ("7.0", "none")}
    labels = dict(
        line.split("/", 1)[1].partition("=")[::2]
        for line in features.read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert labels["archgap.nvidia-cufft.sm_80"] == "blocked"
    assert labels["archgap.nvidia-cufft.sm_70"] == "none"
    assert labels["archgap.health"] == "no-kernel" and labels["archgap.ok"] == "false"


def _cusparselt() -> Path:
    (folder,) = need_data("wheels-cusparselt")
    (wheel,) = folder.glob("nvidia_cusparselt_cu13-0.10.0-*.whl")
    return wheel


def _cuobjdump_count(library: Path, option: str, target: str) -> tuple[int, int]:
    """(entries of ``target``, all entries) that cuobjdump lists with ``option``."""
    (tool,) = (ROOT / "tests" / ".data" / "venv-cuobjdump").glob(
        "lib/python*/site-packages/nvidia/*/bin/cuobjdump"
    )
    out = subprocess.run([str(tool), option, str(library)], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    names = re.findall(r"\.(sm_\w+)\.(?:cubin|ptx)$", out, re.MULTILINE)
    return sum(1 for n in names if n == target), len(names)


def test_a_library_serving_a_gpu_with_one_module_in_a_thousand_is_partial(tmp_path: Path) -> None:
    wheel = _cusparselt()
    need_data("venv-cuobjdump")
    with zipfile.ZipFile(wheel) as archive:
        library = Path(archive.extract("nvidia/cu13/lib/libcusparseLt.so.0", tmp_path))
    sass, listed_sass = _cuobjdump_count(library, "--list-elf", "sm_75")
    ptx, listed_ptx = _cuobjdump_count(library, "--list-ptx", "sm_75")
    assert (sass, listed_sass) == (1, 1128)  # the "one sm_75 module of 1,128"

    result = run_cli("scan", str(wheel), "--gpu", "T4", "--gpu", "A100", "--gpu", "H100",
                     "--gpu", "RTX PRO 6000", "--json")  # fmt: skip
    doc = json_output(result, "scan")
    verdicts = {p["gpu"]: p for p in doc["packages"]}
    assert {gpu: p["verdict"] for gpu, p in verdicts.items()} == {
        "T4": "partial", "A100": "native", "H100": "native", "RTX PRO 6000": "native",
    }  # fmt: skip
    (t4,) = verdicts["T4"]["libraries"]
    assert t4["verdict"] == "partial" and t4["deciding_entry"].startswith("sm_75 SASS")
    counts = re.search(r"only (\d+) of ([\d,]+) modules serve 7\.5", t4["reason"])
    assert counts, t4["reason"]
    # what serves 7.5: the sm_75 cubin and the compute_75 PTX cuobjdump lists (no container
    # outside the listed fatbin holds sm_75); of all it holds, listed or loaded by itself
    assert int(counts.group(1)) == sass + ptx
    assert int(counts.group(2).replace(",", "")) >= listed_sass + listed_ptx
    assert verdicts["T4"]["reason"].startswith("libcusparseLt.so.0 serves 7.5 thinly")
    # partial is a gap only with --strict, as everywhere
    assert result.returncode == 0
    strict = run_cli("scan", str(wheel), "--gpu", "T4", "--strict")
    assert strict.returncode == 1 and "partial" in strict.stdout
    gate = run_cli("kernels", str(wheel), "--require", "T4", "--strict", "--json")
    failures = json_output(gate, "kernels")["require"]["failures"]
    assert gate.returncode == 1 and [f["verdict"] for f in failures] == ["partial"]


def test_the_build_gate_calls_a_wheel_for_another_cpu_blocked(tmp_path: Path) -> None:
    """libmix.so (tests/fixtures/cuda/build.sh) is an x86-64 ELF with sm_75 SASS: it runs on a T4
    (7.5). In a wheel named for aarch64, pip installs it on aarch64 hosts, where an x86-64 library
    cannot load (the ELF machine is not the host's): blocked, not none; the same library in a
    wheel named for x86-64 passes."""
    library = (CUDA_BIN / "libmix.so").read_bytes()
    assert int.from_bytes(library[18:20], "little") == 62  # e_machine: EM_X86_64
    verdicts = {}
    for tag in ("manylinux2014_aarch64", "manylinux2014_x86_64"):
        wheel = tmp_path / f"kpkg-1.0-py3-none-{tag}.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr("kpkg/libk.so", library)
            zf.writestr("kpkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: kpkg\n"
                        "Version: 1.0\n")  # fmt: skip
            zf.writestr("kpkg-1.0.dist-info/RECORD", "kpkg/libk.so,,\n")
        result = run_cli("kernels", str(wheel), "--require", "T4", "--json")
        gate = json_output(result, "kernels")["require"]
        verdicts[tag] = (result.returncode, [f["verdict"] for f in gate["failures"]])
    assert verdicts == {"manylinux2014_aarch64": (1, ["blocked"]), "manylinux2014_x86_64": (0, [])}
