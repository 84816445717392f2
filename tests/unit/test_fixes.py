"""The one fix engine (scan and explain): a fix is offered only where the model says it works.

Each expectation is derived from FlashInfer's released source and NVIDIA's rules:
- sm_120a cubins run only on 12.0; GB10 is 12.1 (FlashInfer's own _normalize_cuda_arch
  docstring: "avoid running SM120 code on SM121 (DGX Spark)"), so its fix is 12.1a, never 12.0a.
- compute_121a/121f need nvcc >= 12.9 (CUDA 12.9 added sm_121); compute_120a needs 12.8.
- flashinfer-python 0.7.1 raises "SM 12.1+ requires CUDA >= 12.9" for 12.1 with nvcc 12.8
  (compilation_context.py), so upgrading does not help GB10 there.
- check_cuda_arch() rejects everything below sm75 (jit/core.py), whatever the toolkit.
- CUDA 13.0 dropped offline compilation for sm_50-sm_72: compute_70 needs CUDA <= 12.9.
"""

from __future__ import annotations

from dataclasses import replace

from archgap.analysis.explain.diagnosis import explain
from archgap.analysis.explain.logparse import parse_log
from archgap.analysis.fixes.engine import FlashinferCase, flashinfer_fixes, ranked, toolkit_limit
from archgap.analysis.verdicts.compat import ComputeCapability
from archgap.kb.signatures import load_signatures
from archgap.probe.facts import Toolkit


def cc(text: str) -> ComputeCapability:
    parsed = ComputeCapability.parse(text)
    assert parsed is not None
    return parsed


def actions(version: str, gpu: str, cuda: str) -> list[str]:
    return [f.action for f in flashinfer_fixes(FlashinferCase(version, cc(gpu), cuda))]


def test_gb10_with_nvcc_128_gets_neither_120a_nor_an_upgrade_that_still_raises() -> None:
    found = actions("0.6.8", "12.1", "12.8")
    assert not any("12.0a" in a or '"0a"' in a for a in found)
    assert not any(a.startswith("upgrade") for a in found)  # 0.7.1 raises for 12.1 on 12.8
    assert not any("FLASHINFER_CUDA_ARCH_LIST" in a for a in found)  # 121a needs nvcc 12.9
    assert found[0] == "install a CUDA toolkit >= 12.9 and point CUDA_HOME at it"


def test_gb10_with_nvcc_129_gets_its_own_minor() -> None:
    found = actions("0.6.8", "12.1", "12.9")
    assert 'export FLASHINFER_CUDA_ARCH_LIST="12.1a"' in found[0]
    assert any('to return (12, "1a")' in a for a in found)
    assert not any("12.0" in a for a in found)


def test_rtx_pro_6000_with_nvcc_128() -> None:
    found = actions("0.6.8", "12.0", "12.8")
    assert 'export FLASHINFER_CUDA_ARCH_LIST="12.0a"' in found[0]
    assert "upgrade flashinfer-python to >= 0.7.1" in found  # 0.7.1 builds compute_120a on 12.8


def test_unsupported_gpu_is_said_so_and_no_toolkit_is_offered() -> None:
    fixes = flashinfer_fixes(FlashinferCase("0.6.8", cc("7.0"), "13.0"))
    assert [f.action.split(" (")[0] for f in fixes] == [
        "FlashInfer 0.6.8 does not support sm_70; avoid its paths"
    ]


def test_a_toolkit_dropped_architecture_reads_as_an_upper_bound() -> None:
    assert toolkit_limit("compute_70") == "CUDA <= 12.9"
    assert toolkit_limit("compute_121a") == "CUDA >= 12.9"


def test_explain_on_gb10_offers_the_gb10_fix() -> None:
    log = parse_log(
        "WARNING flashinfer: Failed to get device capability: SM 12.x requires CUDA >= 12.9.\n"
        "GPU: NVIDIA GB10, compute capability 12.1\n"
        "nvcc: Cuda compilation tools, release 12.9, V12.9.86\n"
        "RuntimeError: FlashInfer requires GPUs with sm75 or higher\n"
    )
    diagnosis = explain(log, load_signatures())
    texts = [f.text for f in diagnosis.fixes]
    assert texts, diagnosis
    assert not any("12.0a" in t or '"0a"' in t for t in texts)
    assert any('FLASHINFER_CUDA_ARCH_LIST="12.1a"' in t for t in texts)


def test_flashinfer_074_builds_sm107_as_the_100f_family_target() -> None:
    # 0.7.4 (as 0.7.1, compilation_context.py line 173) get_nvcc_flags_list: SM 10.7 ('7a') ->
    # -gencode=arch=compute_100f,code=sm_100f when `nvcc --list-gpu-arch` lacks compute_107
    # (nvcc 13.0 does: sm_107 arrives in CUDA 13.4); 0.6.8-0.6.15 have no SM 10.7 rule.
    from archgap.analysis.fixes.flashinfer_rules import build_target, normalise_arch
    from archgap.analysis.verdicts.compat import sass_runs_on
    from archgap.kb.toolchain import flashinfer_range

    rng = flashinfer_range("0.7.4")
    assert rng is not None and rng.sm107_to_100f
    norm = normalise_arch(rng, 10, 7, "13.0")
    assert norm.minor_text == "7a"
    assert build_target(rng, 10, "7a", "13.0") == "compute_100f"
    assert sass_runs_on(100, "f", cc("10.7"))  # the 10.x family: {10.0, 10.3, 10.7}
    assert flashinfer_range("0.7.1") == rng  # one rule from 0.7.1 on (tests/.data 0.7.1 source)
    older = flashinfer_range("0.6.15")
    assert older is not None and build_target(older, 10, "7a", "13.0") == "compute_107a"


def test_explain_without_the_exact_gpu_gives_each_minor_its_own_fix() -> None:
    # "SM 12.x requires CUDA >= 12.9" names only the major: 12.0 (RTX PRO 6000) and 12.1 (GB10)
    # need different fixes with nvcc 12.8 (120a builds; 121a needs 12.9): what both share is a
    # fix, the rest one case per GPU (issue 43: no fix as if a GPU the log never names were there).
    log = parse_log(
        "WARNING flashinfer: Failed to get device capability: SM 12.x requires CUDA >= 12.9.\n"
        "nvcc: Cuda compilation tools, release 12.8, V12.8.93\n"
        "RuntimeError: FlashInfer requires GPUs with sm75 or higher\n"
    )
    d = explain(log, load_signatures())
    texts = [f.text for f in d.fixes]
    assert any(">= 12.9" in t for t in texts)  # a newer toolkit: on either GPU
    assert not any("FLASHINFER_CUDA_ARCH_LIST" in t or "upgrade" in t for t in texts)
    cases = {c.when.split(" (")[0]: c for c in d.cases}
    assert any('="12.0a"' in t for t in cases["if the GPU is 12.0"].fixes)
    twelve_1 = cases["if the GPU is 12.1"]  # 0.7.1 raises for 12.1; 121a needs nvcc 12.9
    assert twelve_1.fixes == () and "no fix of its own" in twelve_1.cause


def toolkit(version: str) -> Toolkit:
    home = f"/usr/local/cuda-{version}"
    return Toolkit(home, "/usr/local/cuda-*", home, "nvcc", f"{home}/bin/nvcc", "ok", version,
                   f"{version}.0", "nvcc --version")  # fmt: skip


def test_a_toolkit_switch_that_breaks_torch_is_never_first() -> None:
    # The incident: nvcc 12.8 on CUDA_HOME, CUDA 13.0 also installed (it builds compute_120f for
    # FlashInfer 0.6.8), torch built for CUDA 12.8. A 13.0 CUDA_HOME changes the CUDA major torch
    # C++ extensions build against: every fix that keeps the toolkit ranks before it.
    case = FlashinferCase("0.6.8", cc("12.0"), "12.8", toolkits=(toolkit("13.0"),))
    with_torch = flashinfer_fixes(replace(case, torch_cuda="12.8"))
    kinds = [f.kind for f in with_torch]
    assert kinds[0] == "env" and kinds.index("toolkit") > kinds.index("upgrade")
    # Without torch (or with torch built for 13.x) nothing breaks: the engine's order stands.
    assert flashinfer_fixes(case)[0].kind == "toolkit"
    assert flashinfer_fixes(replace(case, torch_cuda="13.0"))[0].kind == "toolkit"


def test_ranked_keeps_the_engines_order_across_findings() -> None:
    # Two GPUs' fixes shown together: grouped by kind, kinds in the order the engine ranked them.
    first = flashinfer_fixes(FlashinferCase("0.6.8", cc("12.0"), "12.8"))
    second = flashinfer_fixes(FlashinferCase("0.6.8", cc("12.1"), "12.9"))
    kinds = [f.kind for f in ranked([*first, *second])]
    assert kinds == sorted(kinds, key=kinds.index)
    assert kinds[0] == first[0].kind
