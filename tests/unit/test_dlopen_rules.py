"""What a library opens by dlopen, and whether dlopen finds it for that library.

The probe (probe.binary.dlnames) on libraries gcc builds here from the C below: a soname string
counts only in an image whose dynamic symbol table imports dlopen (`nm -D`: U dlopen), and a
name after a "/" is a path, which dlopen opens as it is. The analysis (analysis.verdicts.dlopen)
on hand-made facts, each expectation from dlopen(3)'s search order for a name without a slash:
the caller's RPATH (without RUNPATH), LD_LIBRARY_PATH, the caller's RUNPATH ($ORIGIN: the
caller's directory, ld.so(8)), /etc/ld.so.cache, /lib, /usr/lib; a library of that soname
already loaded in the process is used. kb/load.json: libcublas.so.12 is nvidia-cublas-cu12's;
ctranslate2 documents that its GPU work needs it (cublas_stub.cc), other packages do not.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from archgap.analysis.verdicts.load import load_model
from archgap.probe.binary.fatbin import read_binary
from archgap.probe.facts import BinaryFacts, Distribution, LoaderFacts, PythonEnvironment

USER = r"""
#include <dlfcn.h>
const char *const names[] = {"libcublas.so.12", "libcudnn.so.9", "/opt/x/libpath.so.1",
                             "not a library", "libfoo.so"};
void *open_them(int i) { return dlopen(names[i], RTLD_LAZY); }
"""
NO_DLOPEN = r"""
const char *const names[] = {"libcublas.so.12"};
const char *name(int i) { return names[i]; }
"""


def build(tmp_path: Path, name: str, source: str) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed: cannot build the test libraries")
    c = tmp_path / f"{name}.c"
    c.write_text(source)
    out = tmp_path / f"lib{name}.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-o", str(out), str(c), "-ldl"], check=True)
    return out


def test_the_sonames_of_a_library_that_imports_dlopen(tmp_path: Path) -> None:
    facts = read_binary(str(build(tmp_path, "user", USER)))
    assert facts.dlopens == ("libcublas.so.12", "libcudnn.so.9", "libfoo.so")


def test_a_library_that_does_not_import_dlopen_opens_nothing(tmp_path: Path) -> None:
    assert read_binary(str(build(tmp_path, "nodl", NO_DLOPEN))).dlopens == ()


SP = "/env/lib/python3.11/site-packages"
CUBLAS = f"{SP}/nvidia/cublas/lib/libcublas.so.12"
TORCH = f"{SP}/torch/lib/libtorch_cuda.so"
SYSTEM = LoaderFacts(("libc.so.6",), ("/etc/ld.so.cache", "/lib", "/usr/lib"))


def lib(path: str, dlopens: tuple[str, ...], runpath: tuple[str, ...] = (),
        needed: tuple[str, ...] = ("libc.so.6",)) -> BinaryFacts:  # fmt: skip
    return BinaryFacts(path, 1, "elf", (), False, None, "x86-64", needed, runpath, (), dlopens)


def dlopen_findings(
    caller: BinaryFacts,
    package: str = "ctranslate2",
    others: tuple[BinaryFacts, ...] = (),
    shipped: tuple[str, ...] = (),
    loader: LoaderFacts | None = SYSTEM,
) -> tuple[list[tuple[str, str, str]], dict[tuple[str, str], str]]:
    dists = [Distribution(package, "1", f"{SP}/{package}-1.dist-info", (caller.path,))]
    dists += [Distribution("torch", "2", f"{SP}/torch-2.dist-info", (b.path,)) for b in others]
    if shipped:
        dists.append(Distribution("nvidia-cublas-cu12", "12", f"{SP}/nc.dist-info", shipped))
    env = PythonEnvironment("/env/bin/python", "3.11.9", (SP,), tuple(dists), ())
    model = load_model(env, [caller, *others], [], None, "", loader)
    found = [(str(f.status), f.cause, f.fix) for f in model.findings if f.check == "dlopen-library"]
    return found, dict(model.blocked)


CALLER = f"{SP}/ctranslate2.libs/libct2.so"


def test_not_found_anywhere_fails_for_a_package_that_needs_it() -> None:
    found, blocked = dlopen_findings(lib(CALLER, ("libcublas.so.12",), ("$ORIGIN",)))
    ((status, cause, fix),) = found
    assert status == "fails" and "libcublas.so.12" in cause and "no installed package" in cause
    assert fix.startswith("pip install nvidia-cublas-cu12")
    assert "dlopen" in blocked[(CALLER, "")]


def test_a_package_that_does_not_say_it_needs_it_is_unknown_and_blocks_nothing() -> None:
    found, blocked = dlopen_findings(lib(CALLER, ("libcublas.so.12",)), package="somepkg")
    assert [s for s, _, _ in found] == ["unknown"] and "needed when it uses it" in found[0][1]
    assert (CALLER, "") not in blocked


def test_installed_in_site_packages_is_not_where_dlopen_searches() -> None:
    # the wheel put it in nvidia/cublas/lib; the caller's RPATH is its own directory
    found, _ = dlopen_findings(lib(CALLER, ("libcublas.so.12",), ("$ORIGIN",)), shipped=(CUBLAS,))
    ((status, cause, fix),) = found
    assert status == "fails" and "which dlopen does not search" in cause
    assert fix == f"add {SP}/nvidia/cublas/lib to LD_LIBRARY_PATH"


def test_the_callers_runpath_finds_it() -> None:
    caller = lib(CALLER, ("libcublas.so.12",), ("$ORIGIN/../nvidia/cublas/lib",))
    assert dlopen_findings(caller, shipped=(CUBLAS,))[0] == []
    braced = lib(CALLER, ("libcublas.so.12",), ("${ORIGIN}/../nvidia/cublas/lib",))
    assert dlopen_findings(braced, shipped=(CUBLAS,))[0] == []


def test_another_librarys_runpath_is_not_the_callers() -> None:
    # torch's library has the RUNPATH to cuBLAS and needs it: found when torch was loaded first
    torch = lib(TORCH, (), ("$ORIGIN/../../nvidia/cublas/lib",), ("libcublas.so.12",))
    found, blocked = dlopen_findings(
        lib(CALLER, ("libcublas.so.12",), ("$ORIGIN",)), others=(torch,), shipped=(CUBLAS,)
    )
    ((status, cause, _),) = found
    assert status == "unknown" and "libtorch_cuda.so" in cause and "loaded first" in cause
    assert (CALLER, "") not in blocked


def test_the_loaders_names_find_it() -> None:
    loader = LoaderFacts(("libc.so.6", "libcublas.so.12"), SYSTEM.directories)
    assert dlopen_findings(lib(CALLER, ("libcublas.so.12",)), loader=loader)[0] == []


def test_one_of_the_sonames_it_tries_is_enough() -> None:
    # a caller that tries libcudart.so.12, then libcudart.so.11.0
    loader = LoaderFacts(("libc.so.6", "libcudart.so.11.0"), SYSTEM.directories)
    caller = lib(CALLER, ("libcudart.so.12", "libcudart.so.11.0"))
    assert dlopen_findings(caller, package="somepkg", loader=loader)[0] == []


def test_what_was_not_read_is_unknown() -> None:
    caller = lib(CALLER, ("libcublas.so.12",))
    assert [s for s, _, _ in dlopen_findings(caller, loader=None)[0]] == ["unknown"]
    elsewhere = lib(CALLER, ("libcublas.so.12",), ("/opt/vendor/lib",))
    assert [s for s, _, _ in dlopen_findings(elsewhere)[0]] == ["unknown"]


def test_names_that_are_no_cuda_library_or_the_drivers_or_its_own_needed_are_not_findings() -> None:
    caller = lib(CALLER, ("libcuda.so.1", "libmkl_def.so.2", "libcublas.so.12"),
                 needed=("libc.so.6", "libcublas.so.12"))  # fmt: skip
    assert dlopen_findings(caller)[0] == []


def test_a_library_loaded_as_a_dependency_beside_the_one_it_opens() -> None:
    # torch's libtorch_cuda.so needs cuDNN and cuBLAS (DT_NEEDED): cuDNN, loaded by it, finds
    # the cuBLAS it opens already loaded (dlopen(3): the same object handle is returned)
    cudnn = lib(f"{SP}/nvidia/cudnn/lib/libcudnn.so.9", ("libcublas.so.12",), ("$ORIGIN",))
    torch = lib(TORCH, (), ("$ORIGIN/../../nvidia/cudnn/lib", "$ORIGIN/../../nvidia/cublas/lib"),
                ("libcudnn.so.9", "libcublas.so.12"))  # fmt: skip
    assert dlopen_findings(cudnn, package="somepkg", others=(torch,), shipped=(CUBLAS,))[0] == []


def test_a_truncated_library_reads_what_is_there_and_never_raises(tmp_path: Path) -> None:
    # bad input is a value: each cut of the library still gives a row, its dlopen names read
    # or None, and names only from the bytes present
    data = build(tmp_path, "user", USER).read_bytes()
    for cut in range(64, len(data), max(1, len(data) // 97)):
        short = tmp_path / "short.so"
        short.write_bytes(data[:cut])
        facts = read_binary(str(short))
        assert facts.dlopens is None or set(facts.dlopens) <= {
            "libcublas.so.12", "libcudnn.so.9", "libfoo.so"
        }  # fmt: skip
