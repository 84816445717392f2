"""The oracle of bench/ecosystem.py checked on its own: its fatbin walk (written from the container
format, importing nothing of archgap) against the nvcc command lines of tests/fixtures/cuda/build.sh
and against NVIDIA's cuobjdump, and its coverage rule against NVIDIA's compatibility rules.

Expectations come from build.sh (what nvcc was asked for; nvcc 13 device-links a shared library,
which adds a container with one cubin per SASS target, so each SASS target is listed twice) and
from cuobjdump's own lists; nothing here is downloaded.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers import need_data

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "tests" / "fixtures" / "cuda" / "bin"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "bench_ecosystem", ROOT / "bench" / "ecosystem.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


eco = _bench()


def targets(path: Path, section: str | None = ".nv_fatbin") -> Counter[str]:
    """Entries per target as nvcc spells them (sm_XY[a|f] for SASS, compute_XY[a|f] for PTX)."""
    found = eco.walk(str(path))
    assert found.problem == ""
    return Counter(
        f"{'sm' if e.kind == 'sass' else 'compute'}_{e.arch}{e.variant}"
        for e in found.entries
        if section is None or e.section == section
    )


def test_walk_reads_what_nvcc_was_asked_for() -> None:
    # build.sh: -gencode ... sm_75 sm_90 sm_90a sm_100a sm_103f sm_120 sm_120a, PTX compute_75,
    # compute_100f, compute_120a; a shared library: every SASS target twice (dlink container)
    assert targets(BIN / "libmix.so") == {
        "sm_75": 2, "sm_90": 2, "sm_90a": 2, "sm_100a": 2, "sm_103f": 2, "sm_120": 2,
        "sm_120a": 2, "compute_75": 1, "compute_100f": 1, "compute_120a": 1,
    }  # fmt: skip
    # nvcc 13.0 writes PTX ISA 9.0 (PTX ISA release history: 9.0 is CUDA 13.0's)
    isas = {e.isa for e in eco.walk(str(BIN / "libmix.so")).entries if e.kind == "ptx"}
    assert isas == {(9, 0)}


def test_walk_finds_a_fatbin_kept_as_data_and_skips_relocatable_ones() -> None:
    # libhidden.so: gcc, no nvcc link; a fatbin (sm_86, sm_110f, compute_89) in .rodata, nothing
    # listed; a bare cubin in .data is no container and is not counted
    assert targets(BIN / "libhidden.so") == {}
    assert targets(BIN / "libhidden.so", section=".rodata") == {
        "sm_86": 1,
        "sm_110f": 1,
        "compute_89": 1,
    }
    # librdc.so (-rdc=true): the per-TU fatbins in __nv_relfatbin are device-link input only
    sections = {e.section for e in eco.walk(str(BIN / "librdc.so")).entries}
    assert sections == {".nv_fatbin"}


def test_walk_of_files_that_are_no_libraries_says_why() -> None:
    # an empty file and a GNU ld script named like a library: a reason each, no exception
    assert eco.walk(str(BIN / "libempty.so")).problem == "too small for ELF"
    assert eco.walk(str(BIN / "libscript.so")).problem == "too small for ELF"
    assert eco.walk(str(BIN / "k_sm86.cubin")).entries == []  # a bare cubin: no container


FIXTURES = ["libmix.so", "librdc.so", "libstub.so", "libptxonly.so", "libcomp_all.so"]
FIXTURES += ["libcomp_speed.so", "exe_two", "libhidden.so"]


@pytest.mark.parametrize("name", FIXTURES)
def test_walk_lists_what_cuobjdump_lists(name: str) -> None:
    (venv,) = need_data("venv-cuobjdump")
    cuobjdump = sorted(venv.glob("lib/python*/site-packages/nvidia/*/bin/cuobjdump"))[0]
    theirs = eco.cuobjdump_lists(cuobjdump, str(BIN / name))
    assert theirs is not None
    walked = eco.walk(str(BIN / name))
    assert {"sass": walked.listed("sass"), "ptx": walked.listed("ptx")} == theirs
    # cuobjdump itself, read directly: the bench's parse of its lines drops nothing
    raw = subprocess.run([str(cuobjdump), "--list-elf", str(BIN / name)], capture_output=True,
                         text=True, check=False).stdout  # fmt: skip
    assert len(theirs["sass"]) == raw.count("ELF file")


@pytest.mark.parametrize(
    ("kind", "arch", "variant", "cc", "runs"),
    [
        # SASS sm_XY: same major, minor >= Y (CUDA Programming Guide 1.3.4.1)
        ("sass", 86, "", "8.9", True),
        ("sass", 86, "", "8.0", False),
        ("sass", 80, "", "9.0", False),
        ("sass", 100, "", "10.3", True),
        ("sass", 100, "", "12.0", False),
        # sm_XYa only on X.Y; sm_XYf on the family (Table 28: compute_100f -> 10.0, 10.3)
        ("sass", 90, "a", "9.0", True),
        ("sass", 100, "a", "10.3", False),
        ("sass", 100, "f", "10.3", True),
        ("sass", 120, "f", "12.1", True),
        ("sass", 100, "f", "12.0", False),
        # PTX compute_XY: any CC >= X.Y (1.3.4.2); compute_XYa is not forward compatible
        ("ptx", 75, "", "12.0", True),
        ("ptx", 90, "", "8.9", False),
        ("ptx", 90, "a", "10.0", False),
        ("other", 75, "", "12.0", False),  # LTO-IR is no loadable code
    ],
)
def test_coverage_follows_nvidia_rules(
    kind: str, arch: int, variant: str, cc: str, runs: bool
) -> None:
    entry = eco.Entry(kind, arch, variant, None, ".nv_fatbin")
    assert eco.covers(entry, cc) is runs
