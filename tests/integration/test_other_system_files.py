"""A wheel that ships every system's build side by side: ctransformers 0.2.27 (py3-none-any,
scripts/testdata), judged on a Linux host.

What the package holds, without archgap:
- `unzip -l`: ctransformers/lib/{avx,avx2,basic}/ hold libctransformers.so, .dylib and
  ctransformers.dll; ctransformers/lib/cuda/ holds libctransformers.so and ctransformers.dll.
  `file`: the .dll is "PE32+ executable (DLL) ... for MS Windows", the .so "ELF 64-bit LSB
  shared object, x86-64".
- `cuobjdump --list-elf/--list-ptx` (CUDA 13.5) of lib/cuda/libctransformers.so: sm_52, sm_61,
  sm_70 cubins and compute_52, compute_61, compute_70 PTX: on an H100 (9.0) only the PTX can
  serve, JIT-compiled by the driver.
- `readelf -d` of it: NEEDED libcudart.so.12 and libcublas.so.12 (no wheel of the environment
  ships them: ctransformers gets them from its `cuda` extra), RUNPATH
  /usr/local/cuda-12.1/targets/x86_64-linux/lib.
Rules: Linux's loader, ld.so(8), loads ELF objects (ctransformers' llm.py picks
lib/<variant>/libctransformers.so on Linux, the .dll on Windows); a missing DT_NEEDED library
fails the load ("cannot open shared object file"). So on Linux the package's one CUDA library
cannot load, whatever its PTX, and the DLL beside it is nothing this host runs: the package is
blocked, not partial.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from archgap.analysis.scan import report_from_facts
from archgap.probe.collect import collect
from archgap.probe.environment.system import System
from archgap.probe.facts import ProbeResponse
from tests.helpers import DATA, need_data, stand_in_loader

VENV = DATA / "venv-ctransformers-0.2.27"
SYSTEM_LIBS = ("libpthread.so.0", "libstdc++.so.6", "libm.so.6", "libgcc_s.so.1", "libc.so.6")


def judged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, platform: str | None) -> Any:
    """The scan of the venv on an H100 with driver 580, the loader replaced by stand-ins of the
    system libraries it needs (the machine's own CUDA libraries change nothing here)."""
    need_data(VENV.name)
    stand_in_loader(tmp_path, monkeypatch, SYSTEM_LIBS)
    python = str(VENV / "bin" / "python")
    request = {
        "python": {"python": python},
        "binaries": {"of_python": True, "deep": False, "detail": False},
        "loader": {},
    }
    sent: dict[str, Any] = json.loads(json.dumps(collect(request, System.local())))
    sent["platform"] = platform
    (package,) = [
        p
        for p in report_from_facts(ProbeResponse(**sent), ["H100"], driver="580.65.06").packages
        if p.package == "ctransformers"
    ]
    return package


def test_on_linux_the_dll_is_not_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = judged(tmp_path, monkeypatch, "Linux 6.8.0 x86_64")
    assert package.verdict == "blocked"
    by_name = {lib.path.rsplit("site-packages/", 1)[1]: lib for lib in package.libraries}
    dll = by_name["ctransformers/lib/cuda/ctransformers.dll"]
    assert dll.role == "not loaded" and "Windows DLL" in dll.role_reason
    so = by_name["ctransformers/lib/cuda/libctransformers.so"]
    assert so.verdict == "blocked"
    assert "libcudart.so.12" in so.reason and "libcublas.so.12" in so.reason
    assert "compute_70" in so.reason  # its kernels for 9.0: the PTX


def test_without_a_host_system_both_builds_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Facts with no host (as wheels are judged) cannot say which build loads: both count, so
    the DLL's PTX keeps the package partly running."""
    assert judged(tmp_path, monkeypatch, None).verdict == "partial"
