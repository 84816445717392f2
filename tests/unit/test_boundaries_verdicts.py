"""Which cubin a verdict names as deciding. CUDA Programming Guide (binary compatibility): of the
cubins that run on a GPU, the runtime loads the one built for the highest architecture not above
it (an 8.9 GPU runs sm_86 before sm_80); verdicts.py names the plain cubin when an arch-specific
one of the same architecture is beside it ('a' cubins are usually a few specialised kernels)."""

from __future__ import annotations

from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.analysis.verdicts.verdicts import library_verdict
from tests.unit.test_verdicts import entry, lib


def test_the_closest_cubin_decides() -> None:
    both = lib("/sp/pkg/libk.so", entry("sm_80"), entry("sm_86"), entry("sm_90"))
    verdict = library_verdict(both, resolve_gpu("8.9"))
    assert verdict.verdict == "native"
    assert verdict.deciding_entry == "sm_86 SASS in .nv_fatbin"


def test_the_plain_cubin_is_named_beside_an_arch_specific_one() -> None:
    both = lib("/sp/pkg/libk.so", entry("sm_90a"), entry("sm_90"))
    verdict = library_verdict(both, resolve_gpu("9.0"))
    assert verdict.deciding_entry == "sm_90 SASS in .nv_fatbin"
