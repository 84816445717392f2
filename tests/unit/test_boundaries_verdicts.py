"""Which cubin a verdict names as deciding. CUDA Programming Guide (binary compatibility): of the
cubins that run on a GPU, the runtime loads the one built for the highest architecture not above
it (an 8.9 GPU runs sm_86 before sm_80); verdicts.py names the plain cubin when an arch-specific
one of the same architecture is beside it ('a' cubins are usually a few specialised kernels)."""

from __future__ import annotations

from dataclasses import replace

from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.analysis.verdicts.verdicts import library_verdict
from archgap.probe.facts import BinaryFacts
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


def _fat(per_target: int, sm75: int) -> BinaryFacts:
    """``per_target`` modules for each of sm_80, sm_86, sm_90, sm_120 and ``sm75`` for sm_75."""
    rows = [replace(entry(t), count=per_target) for t in ("sm_80", "sm_86", "sm_90", "sm_120")]
    return lib("/sp/pkg/libfat.so", replace(entry("sm_75"), count=sm75), *rows)


def test_thin_coverage_at_just_below_and_just_above_a_tenth_of_an_even_share() -> None:
    """kb/roles.json "thin_coverage": a library serving a GPU with *fewer* than a tenth of an
    even share of its modules is partial there. On a T4 (7.5) only the sm_75 cubins run (SASS
    never runs on an older GPU). 4 modules of 200 over 5 targets: an even share is 40, a tenth
    exactly 4 -> not fewer, native; 3 of 199 (a tenth 3.98) -> partial; 5 of 201 -> native."""
    t4 = resolve_gpu("T4")
    assert library_verdict(_fat(49, 4), t4).verdict == "native"
    below = library_verdict(_fat(49, 3), t4)
    assert below.verdict == "partial"
    assert below.reason.startswith("only 3 of 199 modules serve 7.5 (3 sm_75; an even share of")
    assert library_verdict(_fat(49, 5), t4).verdict == "native"
