"""Hidden containers decide a verdict only for a library that can load device code itself.

The runtime registers a library's listed fatbin (``.nv_fatbin``) and nothing else; device code
kept in a data section runs only if the library hands it to the driver itself
(``cuModuleLoadData`` and kin, CUDA Driver API "Module Management"). Fixtures of
tests/fixtures/cuda/build.sh, built with gcc from the same sources, hold the same device code:
a fatbin with SASS sm_86, sm_110f and PTX compute_89 in ``.rodata`` and a bare sm_89 cubin in
``.data``; nothing listed (MANIFEST.tsv). From their own symbols (``nm -D --undefined-only``):
libhidden_loads.so imports ``cuModuleLoadData``; libhidden.so imports no CUDA function and
neither needs (``readelf -d``) nor dlopens libcuda. SASS sm_86 runs on 8.6 (same major, minor
not above: CUDA C++ Programming Guide, binary compatibility).
"""

from __future__ import annotations

import pytest

from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.analysis.verdicts.verdicts import library_verdict
from archgap.probe.binary.fatbin import read_binary
from tests.helpers import CUDA_BIN


def test_hidden_containers_of_a_library_that_loads_them_decide() -> None:
    facts = read_binary(str(CUDA_BIN / "libhidden_loads.so"), deep=True)
    verdict = library_verdict(facts, resolve_gpu("8.6"))
    assert (verdict.verdict, verdict.from_deep_search) == ("native", True)
    assert verdict.deciding_entry == "sm_86 SASS in .rodata"


@pytest.mark.parametrize("gpu", ["8.6", "8.9"])
def test_hidden_containers_of_a_library_with_no_way_to_load_them_do_not_decide(gpu: str) -> None:
    facts = read_binary(str(CUDA_BIN / "libhidden.so"), deep=True)
    assert {e.target for e in facts.entries} >= {"sm_86", "sm_89"}  # listed by a deep read
    verdict = library_verdict(facts, resolve_gpu(gpu))
    assert (verdict.verdict, verdict.from_deep_search, verdict.deciding_entry) == (
        "none",
        False,
        None,
    )
    # where they would have decided, the reason says so: the best of them for the GPU
    best = "sm_89 SASS in .data" if gpu == "8.9" else "sm_86 SASS in .rodata"
    assert f"{best} would serve it" in verdict.reason
    assert "has no way to load it" in verdict.reason


def test_no_note_where_the_hidden_containers_would_not_serve_either() -> None:
    # 7.5: SASS sm_8x never runs across majors; compute_89 PTX JIT-compiles for 8.9 and up only
    facts = read_binary(str(CUDA_BIN / "libhidden.so"), deep=True)
    verdict = library_verdict(facts, resolve_gpu("7.5"))
    assert verdict.verdict == "none" and "no way to load" not in verdict.reason
