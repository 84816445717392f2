"""A scan searches data sections only where hidden entries can change what it says.

Expectations come from NVIDIA's rules (CUDA C++ Programming Guide, binary compatibility, and the
family table of kb/gpus.json) and from what cuobjdump 13.5 lists for the fixtures of
tests/fixtures/cuda/build.sh:
- libmix.so lists SASS sm_75, sm_90, sm_90a, sm_100a, sm_103f, sm_120, sm_120a (and PTX);
- libstub.so lists one sm_75 cubin without a .text section (kernel-less);
- libhidden.so lists nothing: its fatbin (sm_86, sm_110f, compute_89) is in .rodata and a bare
  sm_89 cubin in .data, found only by a deep read; libhidden_loads.so holds the same and loads
  them itself.
Which of them can load device code outside the listed fatbin, from `nm -D --undefined-only`
and `readelf -d`: libhidden_loads.so imports cuModuleLoadData; libmix.so and libstub.so import
only the runtime's __cudaRegisterFatBinary family from libcudart.so.13 (what registers the
listed fatbin) and need no libcuda; libhidden.so imports nothing CUDA at all, and none of the
three imports dlopen. Only the first can run hidden entries, so only it is searched.
SASS sm_XY runs on X.Z for Z >= Y (never across majors, never across minors on Tegra: Orin 8.7,
Thor 11.0); sm_XYa only on X.Y; sm_XYf on its family from X.Y.
"""

from __future__ import annotations

from typing import Any

import pytest

from archgap.analysis.deep_plan import deep_search_plan
from archgap.probe.binary.deep_plan import (
    judged_native_sets,
    loads_device_code,
    needs_deep_search,
    read_selectively,
)
from archgap.probe.binary.fatbin import read_binary
from archgap.probe.facts import BinaryFacts
from tests.helpers import CUDA_BIN

MATRIX = ["7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "10.3", "12.0", "12.1"]  # kb default_matrix


@pytest.fixture(scope="module")
def plan() -> dict[str, Any]:
    return deep_search_plan()


@pytest.mark.parametrize(
    ("cc", "native", "not_native"),
    [
        ("8.9", {"sm_80", "sm_86", "sm_89"}, {"sm_75", "sm_87", "sm_90", "sm_90a"}),
        ("8.7", {"sm_87"}, {"sm_80", "sm_86"}),  # Orin: Tegra runs only its own minor
        ("10.3", {"sm_100", "sm_103", "sm_100f", "sm_103f"}, {"sm_100a", "sm_110", "sm_120"}),
        ("11.0", {"sm_110", "sm_110f"}, {"sm_100", "sm_101"}),  # Thor; sm_101 is undocumented
        ("12.1", {"sm_120", "sm_121", "sm_120f"}, {"sm_120a", "sm_100", "sm_90"}),
    ],
)
def test_the_plan_lists_the_cubins_native_to_each_gpu(
    plan: dict[str, Any], cc: str, native: set[str], not_native: set[str]
) -> None:
    listed = set(plan["native"][cc])
    assert native <= listed
    assert not listed & not_native


def test_the_plan_names_the_gpus_a_scan_judges() -> None:
    plan = deep_search_plan(["H100", "sm_120", "13.0"])
    assert plan["named"] == ["9.0", "12.0", "13.0"]
    assert plan["default"] == MATRIX
    assert "sm_130" in plan["native"]["13.0"]  # a GPU no table knows yet: sm_130 still runs


def test_judged_gpus_are_the_named_and_present_ones_else_the_matrix(plan: dict[str, Any]) -> None:
    nothing = judged_native_sets(plan, None)
    assert nothing is not None and len(nothing) == len(MATRIX)
    present = {"gpus": [{"index": 0, "compute_capability": "8.0"}]}
    judged = judged_native_sets({**plan, "named": ["12.0"]}, present)
    assert judged is not None
    blackwell, ampere = judged
    assert "sm_120" in blackwell and "sm_80" in ampere and "sm_120" not in ampere


@pytest.mark.parametrize("reported", ["", "[N/A]", "sm_80", None])
def test_a_present_gpu_the_plan_cannot_place_means_searching_everything(
    plan: dict[str, Any], reported: str | None
) -> None:
    # The analysis may still identify such a GPU by its name; the probe cannot.
    gpus = {"gpus": [{"index": 0, "compute_capability": reported}]}
    assert judged_native_sets(plan, gpus) is None


@pytest.mark.parametrize("bad", [None, {}, {"native": []}, {"native": {}, "named": ["9.0"]}])
def test_no_usable_plan_means_searching_everything(bad: Any) -> None:
    assert judged_native_sets(bad, None) is None


@pytest.mark.parametrize(
    ("name", "gpus", "deep"),
    [
        ("libmix.so", ["9.0", "12.0"], False),  # sm_90, sm_120 listed
        ("libmix.so", ["10.0", "10.3", "12.1"], False),  # sm_100a, sm_103f, sm_120
        # sm_75 cannot serve 8.x, but libmix.so cannot load hidden entries: they cannot decide
        ("libmix.so", ["8.6"], False),
        ("libmix.so", MATRIX, False),
        ("libstub.so", ["7.5"], False),  # its only listed cubin has no kernel; no loader either
        ("libhidden.so", ["8.6"], False),  # nothing listed, nothing to load with
        ("libhidden_loads.so", ["8.6"], True),  # nothing listed, and it loads modules itself
        ("libhidden_loads.so", MATRIX, True),
    ],
)
def test_a_file_is_searched_deeply_where_it_loads_and_its_listed_kernels_leave_a_gpu(
    plan: dict[str, Any], name: str, gpus: list[str], deep: bool
) -> None:
    judged = judged_native_sets({**plan, "named": gpus}, None)
    assert judged is not None
    facts = read_binary(str(CUDA_BIN / name), deep=False)
    assert needs_deep_search(facts, judged) is deep


@pytest.mark.parametrize(
    ("name", "sign"),
    [
        ("libhidden_loads.so", "imports cuModuleLoadData"),
        ("libhidden.so", ""),
        ("libmix.so", ""),
        ("libstub.so", ""),
    ],
)
def test_whether_a_library_can_load_device_code_itself_comes_from_its_imports(
    name: str, sign: str
) -> None:
    facts = read_binary(str(CUDA_BIN / name), deep=False)
    assert loads_device_code(facts) == sign


def test_a_library_whose_tables_were_not_read_may_load_device_code() -> None:
    facts = read_binary(str(CUDA_BIN / "libhidden.so"), deep=False)
    unread = BinaryFacts(facts.path, facts.size, facts.format, (), False, needed=facts.needed)
    assert unread.dlopens is None and loads_device_code(unread) is None


def test_files_are_read_plainly_and_deeply_where_needed_counting_each_file_once(
    plan: dict[str, Any],
) -> None:
    judged = judged_native_sets({**plan, "named": ["9.0"]}, None)
    assert judged is not None
    names = ["libhidden.so", "libhidden_loads.so", "libmix.so", "libstub.so"]
    missing = BinaryFacts("/nonexistent/lib.so", 0, "unreadable", (), False, "no such file")
    found = [(str(CUDA_BIN / n), None) for n in names] + [(missing.path, missing)]
    told: list[tuple[int, int, str]] = []
    facts = list(read_selectively(found, judged, lambda *a: told.append(a)))
    assert [(f.path.rsplit("/", 1)[-1], f.deep) for f in facts] == [
        ("libhidden.so", False), ("libhidden_loads.so", True), ("libmix.so", False),
        ("libstub.so", False), ("lib.so", False),
    ]  # fmt: skip
    # n/N of the four files to read, each told once, when it is read whole (libhidden_loads.so
    # after its deep read, the others after their plain one).
    assert [(done, total) for done, total, _ in told] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert sorted(path.rsplit("/", 1)[-1] for _, _, path in told) == names
    assert facts[1] == read_binary(str(CUDA_BIN / "libhidden_loads.so"), deep=True)
