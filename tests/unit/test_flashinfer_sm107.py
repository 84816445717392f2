"""FlashInfer on SM 10.7 (Rubin), from the released sources in tests/.data (issue 38 item 6).

flashinfer-python 0.7.1, flashinfer/compilation_context.py lines 171-178:

    apply_sm107_mapping = (
        map_sm107_to_100f and not cutlass_supports_sm107()
    ) or not _nvcc_supports_sm107()
    ...
        if apply_sm107_mapping and major == 10 and minor == "7a":
            flags.append("-gencode=arch=compute_100f,code=sm_100f")

and ``_nvcc_supports_sm107`` (lines 55-71) is ``"compute_107" in`` the output of the resolved
``nvcc --list-gpu-arch``; nvcc lists sm_107 from CUDA 13.4 on (kb/toolkits.json). So with nvcc
12.9 every 0.7.1 module builds SM 10.7 ('7a', _normalize_cuda_arch line 109) as compute_100f, a
family target that runs on 10.7: the JIT works.

flashinfer-python 0.6.16, line 132: ``apply_sm107_mapping = map_sm107_to_100f and not
cutlass_supports_sm107()``: only callers that opt in get compute_100f (the global flags do,
jit/cpp_ext.py lines 211-213; the wheel's CUTLASS arch.h has no ``struct Sm107``); modules with
their own arch flags that do not opt in (jit/comm.py line 40: ``supported_major_versions=[9,
10]``) build compute_107a, which nvcc 12.9 cannot compile.
"""

from __future__ import annotations

from pathlib import Path

from archgap.analysis.jit.compilers import jit_findings
from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.kb import toolchain as kb
from archgap.probe.environment.toolkit import _source_checks
from archgap.probe.facts import EnvVar, InstalledPackage, ToolchainFacts, Toolkit
from tests.helpers import need_data

SITE = "lib/python3.11/site-packages"
OPT_IN = "apply_sm107_mapping = map_sm107_to_100f and not cutlass_supports_sm107()"  # 0.6.16


def _site(version: str) -> Path:
    (venv,) = need_data(f"venv-flashinfer-python-{version}")
    return venv / SITE


def _facts(version: str, nvcc: str) -> ToolchainFacts:
    """flashinfer-python VERSION from its released source, CUDA_HOME=/opt/cuda with nvcc NVCC;
    the source checks are the probe's own reading of that installed copy."""
    site = _site(version)
    tk = Toolkit(
        "/opt/cuda", "CUDA_HOME", "env CUDA_HOME (svc.env)", "nvcc", "/opt/cuda/bin/nvcc",
        "ok", nvcc, None, "`/opt/cuda/bin/nvcc --version`", None,
    )  # fmt: skip
    dist = site / f"flashinfer_python-{version}.dist-info"
    checks = tuple(_source_checks((str(site),), kb.all_source_checks()))
    return ToolchainFacts(
        env_source="svc.env",
        env=(EnvVar("CUDA_HOME", "/opt/cuda", "svc.env"),),
        which_nvcc=None,
        toolkits=(tk,),
        packages=(InstalledPackage("flashinfer-python", version, str(dist)),),
        torch=None,
        source_checks=checks,
        site_packages=(str(site),),
    )


def _rubin(version: str, nvcc: str):  # type: ignore[no-untyped-def]
    (finding,) = [
        f
        for f in jit_findings(_facts(version, nvcc), [resolve_gpu("10.7")])
        if f.package == "flashinfer-python"
    ]
    return finding


def _line(version: str, needle: str) -> int | None:
    text = (_site(version) / "flashinfer/compilation_context.py").read_text().splitlines()
    return next((n for n, line in enumerate(text, 1) if needle in line), None)


def test_flashinfer_071_with_nvcc_129_builds_sm107_as_compute_100f() -> None:
    assert not kb.toolkit_can_target("12.9", "compute_107a")  # sm_107 arrives in CUDA 13.4
    finding = _rubin("0.7.1", "12.9")
    assert finding.status == "ok", finding.cause  # builds, and nothing left unconfirmed
    assert "builds compute_100f" in finding.cause
    assert "Not every module" not in finding.cause  # 0.7.1 maps it for every caller
    whats = [f.what for f in finding.chain]
    assert "confirmed in installed source: ) or not _nvcc_supports_sm107()" in whats
    assert not [w for w in whats if w.startswith(("NOT in installed", "not checked"))]
    rng = kb.flashinfer_range("0.7.1")
    assert rng is not None and rng.sm107_to_100f and not rng.sm107_not_all


def test_flashinfer_0616_builds_sm107_as_compute_100f_only_where_a_caller_opts_in() -> None:
    finding = _rubin("0.6.16", "12.9")
    # the global flags opt in: the modules without their own arch flags build compute_100f
    assert finding.status == "ok", finding.cause
    assert "builds compute_100f" in finding.cause
    # jit/comm.py and the others with their own arch flags do not: compute_107a, nvcc 12.9 fails
    assert "Not every module" in finding.cause and "compute_107a" in finding.cause
    whats = [f.what for f in finding.chain]
    assert f"confirmed in installed source: {OPT_IN}" in whats
    assert not [w for w in whats if w.startswith(("NOT in installed", "not checked"))]
    rng = kb.flashinfer_range("0.6.16")
    assert rng is not None and rng.low == "0.6.16" and rng.high_excl == "0.7.1"


def test_flashinfer_068_has_no_sm107_mapping_and_fails_with_nvcc_129() -> None:
    # 0.6.8 builds every SM 10.x as compute_1Xa (no SM 10.7 rule): compute_107a, not in nvcc 12.9
    assert _line("0.6.8", "sm107") is None
    finding = _rubin("0.6.8", "12.9")
    assert finding.status == "fails", finding.cause
    assert "compute_107a" in (finding.error or "")


def test_the_source_checks_tell_071_from_0616_by_the_line_that_differs() -> None:
    needle = ") or not _nvcc_supports_sm107()"  # the clause 0.7.1 added for every caller
    assert _line("0.7.1", needle) == 173
    assert _line("0.6.16", needle) is None
    opt_in = OPT_IN
    assert _line("0.6.16", opt_in) == 132
    assert _line("0.7.1", opt_in) is None
    new, old = kb.flashinfer_range("0.7.1"), kb.flashinfer_range("0.6.16")
    assert new is not None and old is not None
    assert needle in {c["needle"] for c in new.source_checks}
    assert opt_in in {c["needle"] for c in old.source_checks}
    # an installed 0.6.16 claiming to be 0.7.x would not confirm 0.7.1's rule
    (mine,) = [c for c in _facts("0.6.16", "12.9").source_checks if c.needle == needle]
    assert not mine.found
