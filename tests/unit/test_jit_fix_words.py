"""The JIT checks word their fixes by kb/fixes_jit.json templates (issue 44 item 4), and where a
check picks between two wordings it picks the one its case calls for.

Expectations from the rules, not from archgap's output:
- CUDA 13.0 dropped offline compilation for Maxwell, Pascal and Volta (sm_50 to sm_72; CUDA 13.0
  release notes, "Deprecated or Dropped Features"): CUDA 12.9 is the last nvcc with compute_70.
- compute_100 (B200) first builds with CUDA 12.8 (its release notes add Blackwell), so an nvcc
  12.4 cannot build it and nothing dropped it.
- GB10 is compute capability 12.1; triton assembles for sm_121a (suffix "a" from 9.0,
  sm_arch_from_capability) and sm_121 first assembles with CUDA 12.9, so a ptxas 12.8 does not
  know it and a CUDA 13.0 one does.
- pytorch#119054: a 470 driver (CUDA 11.4) refuses cubins of triton's CUDA 12 ptxas; a CUDA
  11.8 ptxas (11.x runs on >= 450.80.02, minor-version compatibility) fixes it.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

from archgap.analysis.fixes.engine import Fix
from archgap.analysis.jit.compilers import jit_findings
from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.probe.facts import EnvVar
from tests.unit.test_jit_rules import facts, ptxas, triton_with_a_cuda_118_toolkit
from tests.unit.test_torch_ext import torch_2141

JIT = Path(__file__).resolve().parents[2] / "src" / "archgap" / "analysis" / "jit"
MAJOR = "the toolkit's major must still match torch's CUDA major."


def test_no_jit_check_words_a_fix_in_code() -> None:
    # Every fix of analysis/jit comes from a template (worded); none is built from a literal.
    for path in sorted(JIT.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            called = isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Fix"
            assert not called, f"{path.name}:{getattr(node, 'lineno', '?')} builds a Fix"


def _words(fix: Fix) -> tuple[str, str, str]:
    return fix.action, fix.tradeoff, fix.kind


def _torch_build_fixes(tmp_path: Path, arch_list: str, nvcc: str) -> tuple[Fix, ...]:
    env = (EnvVar("TORCH_CUDA_ARCH_LIST", arch_list, "svc.env"),)
    f = replace(facts(flashinfer=None, nvcc=nvcc, extra_env=env), torch=torch_2141(tmp_path))
    got = [x for x in jit_findings(f, [resolve_gpu("GB10")]) if x.package.startswith("torch")]
    (build,) = [x for x in got if x.error and "Unsupported gpu architecture" in x.error]
    return build.fixes


def test_an_entry_a_newer_toolkit_dropped_names_the_release_that_dropped_it(
    tmp_path: Path,
) -> None:
    drop, toolkit = _torch_build_fixes(tmp_path, "7.0;12.0a", "13.0")
    assert _words(drop) == (
        "drop 7.0 from TORCH_CUDA_ARCH_LIST",
        "nvcc 13.0 cannot build compute_70; GPUs of that architecture then get no kernels "
        "from the extension.",
        "env",
    )
    assert _words(toolkit) == (
        "build with CUDA <= 12.9 (point CUDA_HOME at such a toolkit)",
        f"Newer toolkits dropped these architectures (CUDA 13.0 dropped compute_70); {MAJOR}",
        "toolkit",
    )


def test_an_entry_too_new_for_the_toolkit_names_no_drop(tmp_path: Path) -> None:
    _, toolkit = _torch_build_fixes(tmp_path, "10.0", "12.4")
    assert _words(toolkit) == (
        "build with CUDA >= 12.8 (point CUDA_HOME at such a toolkit)",
        MAJOR[0].upper() + MAJOR[1:],
        "toolkit",
    )


TESTED = "Triton then assembles every kernel with that ptxas; it is not the version triton tested."


def test_triton_without_a_driver_offers_a_ptxas_that_knows_the_target_and_an_upgrade() -> None:
    bundled = ptxas("/site/triton/backends/nvidia", "12.8")
    cuda13 = ptxas("/usr/local/cuda-13.0", "13.0", "nvcc", "/usr/local/cuda-*")
    f = facts(flashinfer=None, triton="3.5.0", extra_toolkits=(bundled, cuda13))
    (finding,) = [x for x in jit_findings(f, [resolve_gpu("GB10")]) if x.package == "triton"]
    env, upgrade = finding.fixes
    assert _words(env) == (
        "export TRITON_PTXAS_PATH=/usr/local/cuda-13.0/bin/ptxas (ptxas 13.0 found there)",
        TESTED,
        "env",
    )
    assert env.env == (("TRITON_PTXAS_PATH", "/usr/local/cuda-13.0/bin/ptxas"),)
    assert _words(upgrade) == (
        "upgrade triton (and the torch that pins it) to a release whose bundled ptxas knows "
        "sm_121a",
        "torch pins triton; upgrade them together.",
        "upgrade",
    )


def test_triton_with_a_driver_too_old_names_the_driver_in_both_fixes() -> None:
    f = triton_with_a_cuda_118_toolkit()
    got = jit_findings(f, [resolve_gpu("A100")], driver_version="470.57.02")
    (finding,) = [x for x in got if x.package == "triton"]
    env, upgrade = finding.fixes
    assert _words(env) == (
        "export TRITON_PTXAS_PATH=/usr/local/cuda-11.8/bin/ptxas (ptxas 11.8 found there)",
        TESTED + " Driver 470.57.02 runs its cubins.",
        "env",
    )
    assert _words(upgrade) == (
        "upgrade the NVIDIA driver, or point TRITON_PTXAS_PATH at a ptxas driver 470.57.02 "
        "supports",
        "A driver upgrade needs a maintenance window.",
        "upgrade",
    )
