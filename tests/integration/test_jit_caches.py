"""The JIT cache audit of `archgap scan`, on caches built for real with nvcc 13.0 in the layouts
FlashInfer, torch extensions and Triton use (their installed source, see probe/jit_caches.py).

Expectations from NVIDIA's rules: sm_XYa runs only on exactly X.Y (so sm_120a not on a GB10, 12.1);
plain sm_XY runs on X.Z, Z >= Y, of the same major only (sm_75 not on 9.0 or 12.1); sm_90 runs on
9.0 and not 12.1.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from archgap.cli import main
from archgap.report.jsondoc import schema
from tests.helpers import need_data
from tests.nvcc_build import NVCC, build_all
from tests.toolkit_stubs import venv_python

pytestmark = pytest.mark.skipif(not NVCC.exists(), reason=f"{NVCC} (nvcc 13.0) is not installed")

VENV_068 = venv_python("venv-flashinfer-python-0.6.8")  # the tests that scan it: need_data
CUDA_13 = Path("/usr/local/cuda-13.0")


@pytest.fixture(scope="module")
def binaries() -> dict[str, Path]:
    return build_all(
        {
            "sm120a": (["-gencode", "arch=compute_120a,code=sm_120a"], ".so"),
            "sm121a": (["-gencode", "arch=compute_121a,code=sm_121a"], ".so"),
            "sm75": (["-gencode", "arch=compute_75,code=sm_75"], ".so"),
            "sm90": (["-cubin", "-arch=sm_90"], ".cubin"),
        }
    )


def put(path: Path, source: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(source.read_bytes())


def flashinfer_cache(home: Path, bins: dict[str, Path], toolkit_home: Path) -> None:
    ops = home / ".cache" / "flashinfer"
    put(ops / "0.6.8/120a/cached_ops/norm/norm.so", bins["sm120a"])
    (ops / "0.6.8/120a/cached_ops/norm/build.ninja").write_text(
        f"ninja_required_version = 1.3\nname = norm\ncuda_home = {toolkit_home}\n"
        "nvcc = $cuda_home/bin/nvcc\ncuda_cflags = -O3 $\n"
        "    -gencode=arch=compute_120a,code=sm_120a\n"
    )
    put(ops / "0.6.8/121a/cached_ops/norm/norm.so", bins["sm121a"])
    # A directory that says 121a holding an sm_120a build: the binary decides, not the name.
    put(ops / "0.6.8/121a/cached_ops/mislabeled/mislabeled.so", bins["sm120a"])
    put(ops / "0.6.7/121a/cached_ops/norm/norm.so", bins["sm121a"])


def torch_cache(root: Path, bins: dict[str, Path]) -> None:
    put(root / "py311_cu128" / "t4_bundle" / "t4_bundle.so", bins["sm75"])


def triton_cache(home: Path, bins: dict[str, Path]) -> None:
    entry = home / ".triton" / "cache" / "Q2ZKX7"
    put(entry / "add_kernel.cubin", bins["sm90"])
    meta = {"hash": "Q2ZKX7", "target": {"backend": "cuda", "arch": 90, "warp_size": 32}}
    (entry / "add_kernel.json").write_text(json.dumps({**meta, "triton_version": "3.3.0"}))


def cupy_cache(home: Path, bins: dict[str, Path]) -> str:
    # CuPy writes the md5 of the cubin (32 hex digits) and then the cubin, as <md5 of key>_2.cubin.
    cubin = bins["sm90"].read_bytes()
    name = hashlib.md5(b"key: arch, options, source").hexdigest() + "_2.cubin"
    path = home / ".cupy" / "kernel_cache" / name
    path.parent.mkdir(parents=True)
    path.write_bytes(hashlib.md5(cubin).hexdigest().encode() + cubin)
    return name


def tree(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()
    }


def scan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    need_data("venv-flashinfer-python-0.6.8")
    code = main(["scan", "--python", str(VENV_068), "--json", *args])
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, schema("scan"))
    return code, doc


def by_key(doc: dict[str, Any], cache: str) -> dict[str, Any]:
    (root,) = [c for c in doc["caches"]["caches"] if c["cache"] == cache]
    return {e["key"]: e for e in root["entries"]}


def verdicts(entry: dict[str, Any]) -> dict[str, str]:
    return {v["gpu"]: v["verdict"] for v in entry["verdicts"]}


def kinds(entry: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f["kind"], f["severity"]) for f in entry["flags"]]


@pytest.fixture
def home(tmp_path: Path, binaries: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    toolkit = tmp_path / "cuda-12.8"  # the toolkit the old build used: its version.json
    toolkit.mkdir()
    (toolkit / "version.json").write_text(json.dumps({"cuda": {"version": "12.8.93"}}))
    flashinfer_cache(home, binaries, toolkit)
    torch_cache(home / ".cache" / "torch_extensions", binaries)
    triton_cache(home, binaries)
    cupy_cache(home, binaries)
    for name in ("FLASHINFER_WORKSPACE_BASE", "TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("TRITON_HOME", raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CUDA_HOME", str(CUDA_13))  # FlashInfer resolves nvcc 13.0 now
    return home


def test_three_layouts_judged_from_their_binaries(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = tree(home)
    code, doc = scan(capsys, "--gpu", "GB10", "--gpu", "H100")
    assert tree(home) == before  # read only
    # Cache findings are reported, they do not gate the exit code; what does is that this x86-64
    # environment cannot run on a GB10 (aarch64) at all: its JIT is blocked there
    # (test_jit_platform.py), and judged on the H100.
    gating = [(f["gpu"], f["status"]) for f in doc["jit"] if f["gates_exit_code"]]
    assert code == 1 and ("GB10", "blocked") in gating, gating
    assert all(status == "blocked" for gpu, status in gating if gpu == "GB10")
    assert all(status == "ok" for gpu, status in gating if gpu != "GB10"), gating

    fi = by_key(doc, "flashinfer")
    # The 12.0a build in a cache used on a GB10 (12.1): sm_120a runs on exactly 12.0 -> none.
    old = fi["0.6.8/120a/cached_ops/norm"]
    assert old["targets"] == ["sm_120a"]
    assert verdicts(old) == {"GB10": "none", "H100": "none"}
    assert kinds(old) == [
        ("other-gpu", "warning"),
        ("other-gpu", "warning"),
        ("other-toolkit", "warning"),
    ]
    assert old["toolkit"].startswith("12.8 (build.ninja cuda_home ")
    assert "FlashInfer now resolves CUDA 13.0" in old["flags"][2]["message"]
    # sm_121a on the GB10: native, and the H100 does not count against a cache keyed by arch.
    good = fi["0.6.8/121a/cached_ops/norm"]
    assert verdicts(good) == {"GB10": "native", "H100": "none"}
    assert good["flags"] == []
    mislabeled = fi["0.6.8/121a/cached_ops/mislabeled"]
    assert mislabeled["targets"] == ["sm_120a"] and verdicts(mislabeled)["GB10"] == "none"
    stale = fi["0.6.7/121a/cached_ops/norm"]
    assert stale["package_version"] == "0.6.7"
    assert kinds(stale) == [("other-version", "info")]
    assert "installed 0.6.8" in stale["flags"][0]["message"]

    # A bundle built on a T4 (sm_75 only): torch loads it by name, nothing runs on 9.0 or 12.1.
    (t4,) = by_key(doc, "torch_extensions").values()
    assert t4["key"] == "py311_cu128/t4_bundle"
    assert verdicts(t4) == {"GB10": "none", "H100": "none"}
    assert kinds(t4) == [("other-gpu", "error"), ("other-gpu", "error")]
    assert t4["toolkit"] == "12.8 (directory py311_cu128)"

    # Triton: an sm_90 cubin with its metadata; native on the H100, so no flag (keyed by target).
    (kernel,) = by_key(doc, "triton").values()
    assert kernel["targets"] == ["sm_90"] and kernel["package_version"] == "3.3.0"
    assert verdicts(kernel) == {"GB10": "none", "H100": "native"}
    assert kernel["flags"] == []

    # CuPy: the cubin behind the 32-digit digest is read; sm_90 runs on 9.0 only.
    (cupy,) = by_key(doc, "cupy").values()
    assert cupy["targets"] == ["sm_90"]
    assert verdicts(cupy) == {"GB10": "none", "H100": "native"}


def test_text_section(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    need_data("venv-flashinfer-python-0.6.8")
    main(["scan", "--python", str(VENV_068), "--gpu", "GB10"])
    text = capsys.readouterr().out
    assert "JIT caches (environment: shell, HOME " in text
    assert "py311_cu128/t4_bundle: sm_75  GB10 none" in text
    assert (
        "torch loads it by name on any GPU: on GB10 (12.1) 'no kernel image is available'" in text
    )


def test_env_from_takes_the_services_home_and_cache_variables(
    home: Path, tmp_path: Path, binaries: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    service_home = tmp_path / "service-home"
    extensions = tmp_path / "shared-extensions"
    torch_cache(extensions, binaries)
    env_file = tmp_path / "service.env"
    env_file.write_text(f"HOME={service_home}\nTORCH_EXTENSIONS_DIR={extensions}\n")
    _code, doc = scan(capsys, "--gpu", "H100", "--env-from", str(env_file))
    caches = {c["cache"]: c for c in doc["caches"]["caches"]}
    assert caches["torch_extensions"]["found_by"] == "TORCH_EXTENSIONS_DIR"
    assert caches["torch_extensions"]["path"] == str(extensions)
    assert caches["flashinfer"]["path"] == str(service_home / ".cache" / "flashinfer")
    assert caches["flashinfer"]["exists"] is False  # not the shell's HOME
    # TORCH_EXTENSIONS_DIR set: torch puts <name>/ directly under it (no py<XY>_cu<XYZ> level).
    assert list(by_key(doc, "torch_extensions")) == ["py311_cu128/t4_bundle"]


def test_a_cache_on_nfs_shared_by_different_gpus(
    tmp_path: Path,
    binaries: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A recorded system tree: /home is an NFS mount (a real mountinfo line from an NFS client).
    root = tmp_path / "root"
    (root / "proc" / "self").mkdir(parents=True)
    (root / "proc" / "self" / "mountinfo").write_text(
        "22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/mapper/vg-root rw\n"
        "98 22 0:53 / /home rw,relatime shared:45 - nfs4 fs01:/export/home "
        "rw,vers=4.2,rsize=1048576,wsize=1048576,hard,proto=tcp\n"
    )
    torch_cache(root / "home" / "u" / ".cache" / "torch_extensions", binaries)
    monkeypatch.setenv("HOME", "/home/u")
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    _code, doc = scan(capsys, "--gpu", "H100", "--root", str(root))
    (torch,) = [c for c in doc["caches"]["caches"] if c["cache"] == "torch_extensions"]
    assert torch["filesystem"] == "nfs4"
    assert [f["kind"] for f in torch["flags"]] == ["network-fs", "shared"]
    assert "sm_75" in torch["flags"][1]["message"]


def test_remote_host_reports_its_own_users_cache(binaries: dict[str, Path]) -> None:
    need_data("venv-flashinfer-python-0.6.8")
    # The sshd test host alpha gives its sessions their own HOME: the probe reads the cache there.
    import shutil

    from tests.helpers import json_output, run_cli
    from tests.integration.test_remote_services import require, ssh_env

    remote_home = Path(require("ssh")["hosts"]["alpha"]["home"])
    cache = remote_home / ".cache"
    torch_cache(cache / "torch_extensions", binaries)
    try:
        args = ("scan", "--host", "alpha", "--python", str(VENV_068), "--gpu", "H100", "--json")
        result = run_cli(*args, env=ssh_env(), timeout=120)
        doc = json_output(result, "scan")
    finally:
        shutil.rmtree(cache)
    assert doc["caches"]["home"] == str(remote_home)
    (t4,) = by_key(doc, "torch_extensions").values()
    assert verdicts(t4) == {"H100": "none"} and kinds(t4) == [("other-gpu", "error")]


def test_fleet_flags_a_cache_shared_over_nfs_by_different_gpus(
    tmp_path: Path, binaries: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # Two hosts mount the same NFS export at /home; one has an H100, the other a GB10. Their cache
    # sections are collected by the real probe over recorded trees (no GPU here: the gpu sections
    # are written as nvidia-smi would report them).
    from archgap.probe.environment.jit_caches import collect_caches
    from archgap.probe.environment.system import System

    docs = tmp_path / "docs"
    docs.mkdir()
    for host, name, cc in (
        ("gpu01", "NVIDIA H100 80GB HBM3", "9.0"),
        ("spark1", "NVIDIA GB10", "12.1"),
    ):
        root = tmp_path / host
        (root / "proc" / "self").mkdir(parents=True)
        (root / "proc" / "self" / "mountinfo").write_text(
            "98 22 0:53 / /home rw,relatime shared:45 - nfs4 fs01:/export/home rw,vers=4.2\n"
        )
        torch_cache(root / "home" / "u" / ".cache" / "torch_extensions", binaries)
        caches = collect_caches(System(root=str(root), env=(("HOME", "/home/u"),)), {})
        gpu = {"index": 0, "name": name, "uuid": "GPU-0", "compute_capability": cc}
        sections = {"gpu": {"gpus": [{**gpu, "source": "nvidia-smi"}]}, "caches": caches}
        facts = {"host": host, "sections": sections, "errors": {}}
        (docs / f"{host}.json").write_text(json.dumps(facts))
    main(["fleet", "--from", str(docs), "--json"])
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, schema("fleet"))
    shared = [s for s in doc["shared_caches"] if s["cache"] == "torch_extensions"]
    assert [(s["share"], s["compute_capabilities"]) for s in shared] == [
        ("fs01:/export/home u/.cache/torch_extensions", ["12.1", "9.0"])
    ]
    assert shared[0]["hosts"] == ["gpu01 (9.0)", "spark1 (12.1)"]
