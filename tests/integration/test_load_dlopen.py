"""Libraries opened at run time by dlopen, on the real ctranslate2 4.8.5 wheel (scripts/testdata).

Expectations, from first principles:
- `readelf -d` of ctranslate2.libs/libctranslate2-a7a60d30.so.4.8.5: RPATH $ORIGIN, NEEDED
  libdl.so.2, librt.so.1, libpthread.so.0, libgomp-e985bcbb.so.1.0.0, libstdc++.so.6, libm.so.6,
  libgcc_s.so.1, libc.so.6, ld-linux-x86-64.so.2: no CUDA library. `readelf --dyn-syms`: dlopen
  is an undefined (UND) symbol, dlopen@GLIBC_2.2.5. `readelf -p .rodata`: "libcublas.so.12"
  (and libnccl.so.2, libcuda.so.1, the MKL libraries). CTranslate2's src/cuda/cublas_stub.cc
  dlopens libcublas.so.<major> on its first cuBLAS call and throws when it is not found.
- dlopen(3): a name without a slash is searched in the caller's RPATH (no RUNPATH), then
  LD_LIBRARY_PATH, its RUNPATH, /etc/ld.so.cache, /lib and /usr/lib; not in site-packages.
- kb/load.json cuda_libraries: libcublas.so.12 is shipped by nvidia-cublas-cu12; libcuda.so.1 is
  the driver's; libnccl.so.2 by nvidia-nccl-cu12 (multi-GPU collectives: needed when used).
Stand-ins (empty files) are the one thing that is not real: the loader's directories (the
system libraries libctranslate2 needs, by name) and the libcublas.so.12 on LD_LIBRARY_PATH; the
loader section lists names only, and a real cuBLAS wheel is 500 MB.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from archgap.analysis.scan import report_from_facts
from archgap.probe.binary.fatbin import read_binary
from archgap.probe.collect import collect
from archgap.probe.environment.system import System
from archgap.probe.facts import ProbeResponse
from tests.helpers import DATA, need_data, stand_in_loader

CT2 = DATA / "venv-ctranslate2-4.8.5"


def ct2_library() -> Path:
    need_data(CT2.name)
    (found,) = CT2.glob("lib/python*/site-packages/ctranslate2.libs/libctranslate2-*.so.*")
    return found


def test_the_probe_reads_what_the_library_may_dlopen() -> None:
    facts = read_binary(str(ct2_library()))
    assert facts.needed is not None and not any("cublas" in n for n in facts.needed)
    assert facts.runpath == ("$ORIGIN",)
    assert facts.dlopens is not None
    assert {"libcublas.so.12", "libnccl.so.2", "libcuda.so.1"} <= set(facts.dlopens)
    # its Python extension imports no dlopen: nothing read as what it opens
    (ext,) = CT2.glob("lib/python*/site-packages/ctranslate2/_ext*.so")
    assert read_binary(str(ext)).dlopens == ()


# What `readelf -d` lists as NEEDED for libctranslate2 besides its bundled libgomp: the system's
# own libraries. The machine's loader is replaced by a directory of stand-ins with these names
# (no cache), so that what it has installed (a system cuBLAS or NCCL) changes nothing here.
SYSTEM_LIBS = ("libdl.so.2", "librt.so.1", "libpthread.so.0", "libstdc++.so.6", "libm.so.6",
               "libgcc_s.so.1", "libc.so.6", "ld-linux-x86-64.so.2")  # fmt: skip


def ct2_facts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **environ: str) -> Any:
    need_data(CT2.name)
    stand_in_loader(tmp_path, monkeypatch, SYSTEM_LIBS)
    python = str(CT2 / "bin" / "python")
    request = {
        "python": {"python": python},
        "toolchains": {"python": python},
        "binaries": {"of_python": True, "deep": False, "detail": False},
        "loader": {},
    }
    facts = collect(request, System.local(environ={"PATH": "/usr/bin:/bin", **environ}))
    sent: dict[str, Any] = json.loads(json.dumps(facts))  # as a remote probe sends them
    return report_from_facts(ProbeResponse(**sent), ["H100"], driver="580.95.05")


def test_cublas_the_loader_does_not_find_is_a_failing_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = ct2_facts(tmp_path, monkeypatch)
    by_status = {f.status: f for f in report.load if f.check == "dlopen-library"}
    failing = by_status["fails"]
    assert failing.package == "ctranslate2" and "libcublas.so.12" in failing.cause
    assert "at run time by dlopen" in failing.cause
    assert failing.fix.startswith("pip install nvidia-cublas-cu12")
    assert "LD_LIBRARY_PATH" in failing.fix and failing.gates_exit_code
    assert [Path(p).name for p in failing.libraries] == [ct2_library().name]
    # NCCL: opened for multi-GPU work only, which the binary does not say is every run
    optional = by_status["unknown"]
    assert "libnccl.so.2" in optional.cause and not optional.gates_exit_code
    assert "needed when it uses it" in optional.cause
    # libcuda.so.1 is the driver's; the MKL names are no CUDA libraries; its DT_NEEDED are
    # there: no other link is broken
    assert [f.check for f in report.load] == ["dlopen-library", "dlopen-library"]
    (package,) = [p for p in report.packages if p.package == "ctranslate2"]
    assert package.verdict != "native"
    assert report.has_gap


def test_cublas_on_ld_library_path_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = tmp_path / "cublas-lib"
    lib.mkdir()
    (lib / "libcublas.so.12").write_bytes(b"")  # stand-in: only its name is read
    report = ct2_facts(tmp_path, monkeypatch, LD_LIBRARY_PATH=str(lib))
    dlopen = [f for f in report.load if f.check == "dlopen-library"]
    assert [f.status for f in dlopen] == ["unknown"]  # NCCL's alone, as above
    assert "libcublas" not in dlopen[0].cause
    assert not any(f.gates_exit_code for f in report.load)
