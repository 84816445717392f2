"""Mutation check: do the tests notice when a decision rule is wrong?

Each mutation is one small semantic change to the decision code (a boundary ``>=`` -> ``>``, an
off-by-one constant, a dropped condition, a swapped branch). Each is applied to a temporary copy
of ``src/`` (never to the working tree), and the test files that cover that module (``TESTS``,
plus every ``tests/unit/test_boundaries_*.py``) run against the copy with ``PYTHONPATH`` pointing
at it. The copy is of a commit (``--rev``, HEAD by default: ``src/``, ``tests/`` and
``pyproject.toml`` as committed, with the working tree's ``tests/.data``), so that others'
unfinished edits in the checkout neither break nor flatter the figure; ``--worktree`` copies the
working tree's ``src/`` and ``tests/`` instead. A mutation is *killed* when a test fails (or
the run times out), *survived* when they all pass. Before any mutation, each subject's tests
run once unmutated: a subject whose tests fail then is reported as such and its mutations are
not scored.

Prints one line per mutation and a score per subject, with the load average at the start and at
the end (the machine is shared: the seconds are not a benchmark).

Usage: .venv/bin/python bench/mutations.py [--only SUBJECT_OR_ID ...] [--rev REV | --worktree]
                                           [--check] [--json FILE]
  --check   only verify that every original snippet occurs exactly once in its file
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PYTHON = ROOT / ".venv" / "bin" / "python"
TIMEOUT = 600  # seconds per mutation run; a run past it counts as killed (a hang is noticed)


@dataclass(frozen=True)
class Mutation:
    subject: str
    file: str  # relative to src/archgap
    original: str  # must occur exactly once in the file
    mutated: str
    what: str

    @property
    def ident(self) -> str:
        return f"{self.subject}:{Path(self.file).stem}:{self.what}"


# The test files that execute each subject's code (tests/unit/test_boundaries_*.py are added to
# every subject).
TESTS: dict[str, tuple[str, ...]] = {
    "compat": (
        "tests/unit/test_compat.py",
        "tests/unit/test_verdicts.py",
        "tests/unit/test_jit_rules.py",
        "tests/unit/test_torch_ext.py",
    ),
    "toolchain": (
        "tests/unit/test_compat.py",
        "tests/unit/test_cuda_major.py",
        "tests/unit/test_jit_rules.py",
        "tests/unit/test_fixes.py",
        "tests/unit/test_explain_rules.py",
    ),
    "drivers": (
        "tests/unit/test_cuda_major.py",
        "tests/unit/test_kb_pretend_release.py",
        "tests/integration/test_load_model.py",
        "tests/integration/test_load_numba.py",
        "tests/integration/test_scan_platform_driver.py",
    ),
    "verdicts": (
        "tests/unit/test_verdicts.py",
        "tests/unit/test_roles.py",
        "tests/unit/test_probe_summary.py",
        "tests/unit/test_blocked_and_thin_rules.py",
        "tests/integration/test_load_model.py",
        "tests/integration/test_blocked_and_thin.py",
    ),
    "load": (
        "tests/unit/test_loader_search.py",
        "tests/unit/test_runpath_dirs.py",
        "tests/unit/test_boundaries_load.py",
        "tests/integration/test_other_system_files.py",
        "tests/unit/test_load_compilers.py",
        "tests/integration/test_load_model.py",
        "tests/integration/test_load_companions.py",
        "tests/integration/test_load_numba.py",
        "tests/unit/test_dlopen_rules.py",
        "tests/unit/test_load_companions_missing.py",
        "tests/integration/test_load_dlopen.py",
        "tests/integration/test_load_companions_spconv.py",
    ),
    "explain": (
        "tests/unit/test_explain_rules.py",
        "tests/unit/test_explain_corpus.py",
        "tests/unit/test_explain_honesty.py",
        "tests/unit/test_gates.py",
        "tests/unit/test_gates_blind_rounds.py",
    ),
    "fixes": (
        "tests/unit/test_fixes.py",
        "tests/unit/test_kb_pretend_release.py",
        "tests/unit/test_jit_rules.py",
        "tests/integration/test_explain_incident.py",
    ),
    "jit": (
        "tests/unit/test_jit_rules.py",
        "tests/unit/test_torch_ext.py",
        "tests/unit/test_runtime_compiler_rows.py",
        "tests/integration/test_triton_evidence.py",
        "tests/integration/test_runtime_compilers.py",
    ),
    "writer": (
        "tests/unit/test_fixer.py",
        "tests/hostile/test_trust_journal.py",
        "tests/hostile/test_writes.py",
    ),
    "archives": ("tests/unit/test_streamread.py", "tests/hostile/test_archives.py"),
}

V = "analysis/verdicts/"
R = "analysis/explain/rules/"
TK = "kb/toolchain.py"

M = Mutation
MUTATIONS: tuple[Mutation, ...] = (
    # --- compatibility (CUDA Programming Guide: SASS within a major from its minor, PTX upwards)
    M("compat", V + "compat.py",
      "    return cc.major == target.major and cc.minor >= target.minor",
      "    return cc.major == target.major and cc.minor > target.minor",
      "unknown family: from its own minor -> above it"),
    M("compat", V + "compat.py",
      "    return cc.major == target.major and cc.minor >= target.minor",
      "    return cc.minor >= target.minor",
      "unknown family: the major dropped"),
    M("compat", V + "compat.py",
      "    runs = cc.major == target.major and cc.minor >= target.minor",
      "    runs = cc.major == target.major and cc.minor > target.minor",
      "plain SASS: on its own minor -> above it"),
    M("compat", V + "compat.py",
      "    runs = cc.major == target.major and cc.minor >= target.minor",
      "    runs = cc.major >= target.major and cc.minor >= target.minor",
      "plain SASS: across majors"),
    M("compat", V + "compat.py",
      'return Compat(cc == target, f"sm_{arch}a',
      'return Compat(cc >= target, f"sm_{arch}a',
      "arch-specific SASS forward"),
    M("compat", V + "compat.py",
      "if cc != target and (is_integrated(cc) or is_integrated(target)):",
      "if cc != target and (is_integrated(cc) and is_integrated(target)):",
      "Tegra rule only between two integrated GPUs"),
    M("compat", V + "compat.py",
      "    return cc >= ComputeCapability.of_arch(arch)",
      "    return cc > ComputeCapability.of_arch(arch)",
      "PTX: on its own capability -> above it"),
    M("compat", V + "compat.py",
      "    if variant:  # 'a' and 'f' PTX",
      "    if variant == 'a':  # 'a' and 'f' PTX",
      "family PTX forward like plain PTX"),
    M("compat", V + "compat.py",
      "        return str(cc) in members",
      "        return str(cc) in members or cc.major == arch // 10",
      "known family: any GPU of its major"),
    # --- the toolkit table (CUDA release notes: targets per release, minimum drivers)
    M("toolchain", TK,
      "        if need and have >= need:\n            best = release.cuda",
      "        if need and have > need:\n            best = release.cuda",
      "driver's CUDA: a driver exactly at a release's minimum"),
    M("toolchain", TK,
      "            ok = have >= floor",
      "            ok = have > floor",
      "minor-version compatibility: a driver exactly at the floor"),
    M("toolchain", TK,
      "        if need and have >= need:\n            return True, (",
      "        if need and have > need:\n            return True, (",
      "runtime on driver: exactly the GA minimum"),
    M("toolchain", TK,
      "        if (major_minor(release.cuda) or (0, 0)) > wanted:",
      "        if (major_minor(release.cuda) or (0, 0)) >= wanted:",
      "targets of a toolkit exclude its own release's additions"),
    M("toolchain", TK,
      "        names -= set(release.targets_dropped)",
      "        names -= set()",
      "dropped targets never dropped"),
    M("toolchain", TK,
      "    if low is not None and have < (version_tuple(low) or ()):",
      "    if low is not None and have <= (version_tuple(low) or ()):",
      "version range: its first version excluded"),
    M("toolchain", TK,
      "have >= (version_tuple(high_excl) or ()))",
      "have > (version_tuple(high_excl) or ()))",
      "version range: its exclusive end included"),
    M("toolchain", TK,
      "        elif last is not None:\n            return last",
      "        elif last is not None:\n            return release.cuda",
      "last toolkit for a target: the one that dropped it"),
    M("toolchain", TK,
      "    if wanted is None or wanted < (major_minor(releases[0].cuda) or (0, 0)):",
      "    if wanted is None or wanted <= (major_minor(releases[0].cuda) or (0, 0)):",
      "the table's first toolkit unknown"),
    # --- driver floors (NVIDIA's architecture matrix, minor-version compatibility)
    M("drivers", "kb/load.py",
      "        if need and have < need:",
      "        if need and have <= need:",
      "driver exactly at an architecture's first driver refused"),
    M("drivers", "kb/load.py",
      "        if last and have[0] > int(last):",
      "        if last and have[0] >= int(last):",
      "driver of the last branch refused"),
    M("drivers", TK,
      "    return (*parts, BRANCH_WIDE) if parts is not None and len(parts) == 1 else parts",
      "    return parts",
      "a lone branch (--driver 570) read as 570.0"),
    M("drivers", V + "drivers.py",
      '            if driver_runs_runtime(driver, f"{major}.0")[0] is False:',
      '            if driver_runs_runtime(driver, f"{major}.0")[0] is not True:',
      "an undecided runtime counted as failing"),
    M("drivers", V + "drivers.py",
      "    isa = max(isas, key=lambda v: version_tuple(v) or (), default=None)",
      "    isa = min(isas, key=lambda v: version_tuple(v) or (), default=None)",
      "the lowest PTX ISA decides the major"),
    M("drivers", V + "drivers.py",
      "    if (version_tuple(release.ptx_isa) or ()) <= (version_tuple(have) or ()):",
      "    if (version_tuple(release.ptx_isa) or ()) < (version_tuple(have) or ()):",
      "JIT: the driver's own PTX ISA refused"),
    M("drivers", "kb/load.py",
      "        return self.extras[runs[-1] if runs else majors[0]]",
      "        return self.extras[runs[0] if runs else majors[0]]",
      "missing NVVM: the extras of the wrong major"),
    # --- verdicts (which library, which cubin decides)
    M("verdicts", V + "verdicts.py",
      'best = max(sass, key=lambda e: (e.arch, e.variant == ""))',
      'best = min(sass, key=lambda e: (e.arch, e.variant == ""))',
      "the oldest cubin named as deciding"),
    M("verdicts", V + "verdicts.py",
      'best = max(sass, key=lambda e: (e.arch, e.variant == ""))',
      'best = max(sass, key=lambda e: (e.arch, e.variant != ""))',
      "an arch-specific cubin preferred over the plain one"),
    M("verdicts", V + "verdicts.py",
      "isa is not None and isa > driver_ptx_isa:",
      "isa is not None and isa >= driver_ptx_isa:",
      "PTX of exactly the driver's ISA refused"),
    M("verdicts", V + "verdicts.py",
      "_RANK[both[0]] <= _RANK[listed[0]]",
      "_RANK[both[0]] < _RANK[listed[0]]",
      "hidden code preferred when no better"),
    M("verdicts", V + "verdicts.py",
      "    if unknown and decided:",
      "    if unknown and not decided:",
      "unknown libraries not named beside a verdict"),
    M("verdicts", V + "verdicts.py",
      "    elif len(none) + len(blocked) == len(decided):",
      "    elif blocked or len(none) == len(decided):",
      "one blocked library among several runs makes the package blocked"),
    M("verdicts", V + "verdicts.py",
      "    elif len(none) + len(blocked) == len(decided):",
      "    elif len(none) == len(decided):",
      "a package whose libraries all cannot load: partial, not blocked"),
    M("verdicts", V + "verdicts.py",
      "    if blocked:\n        links = sorted(",
      "    if blocked and not none:\n        links = sorted(",
      "blocked beside nothing-for-the-GPU rolled up as none"),
    M("verdicts", V + "verdicts.py",
      "    if judged.verdict == NONE:  # nothing for the GPU",
      "    if judged.verdict == UNKNOWN:  # nothing for the GPU",
      "a library with nothing for the GPU that cannot load called blocked"),
    M("verdicts", V + "verdicts.py",
      "served >= roles.thin_coverage().min_share * share:",
      "served > roles.thin_coverage().min_share * share:",
      "thin coverage: exactly a tenth of an even share called thin"),
    M("verdicts", V + "verdicts.py",
      "served >= roles.thin_coverage().min_share * share:",
      "served >= roles.thin_coverage().min_share * total:",
      "thin coverage: a tenth of all modules, not of an even share"),
    # --- the load model
    M("load", V + "load.py",
      "    return _base(binary.path) in loaded.names and bool(held & loaded.dirs)",
      "    return bool(held)",
      "a library anywhere in site-packages counted as found"),
    M("load", V + "load.py",
      "    if held and any(fnmatch.fnmatchcase(name, pattern) for pattern in preloads):",
      "    if False:",
      "a package's own ctypes preloads not counted"),
    M("load", V + "platform.py",
      "        if b.format in _FORMAT_NAME and b.format != loads",
      "        if b.format in _FORMAT_NAME and b.format == loads",
      "the host's own format counted as another system's"),
    M("load", "probe/binary/runpath.py",
      "                found = frozenset() if exc.errno in GONE else None",
      "                found = None",
      "a RUNPATH directory the target lacks left unknown"),
    M("load", V + "load.py",
      '    if skipped is not None and skipped.value == "1":',
      '    if skipped is not None and skipped.value != "":',
      "torchao's skip variable = 0 skips"),
    M("load", V + "load.py",
      "    elif (version_tuple(have) or ()) < (version_tuple(torch_min) or ()):",
      "    elif (version_tuple(have) or ()) <= (version_tuple(torch_min) or ()):",
      "torch exactly at the gate's minimum refused"),
    M("load", V + "load.py",
      "        if override.isdigit() and len(override) >= 2:",
      "        if override.isdigit() and len(override) >= 3:",
      "two-digit BNB_CUDA_VERSION refused"),
    M("load", V + "load.py",
      "            return (int(override[:-1]), int(override[-1])), f",
      "            return (int(override[:1]), int(override[1:])), f",
      "BNB_CUDA_VERSION split after its first digit"),
    M("load", V + "load.py",
      "    return max(lower) if lower else min(higher) if higher else None",
      "    return min(lower) if lower else min(higher) if higher else None",
      "the lowest build below instead of the highest"),
    M("load", V + "load.py",
      "    return max(lower) if lower else min(higher) if higher else None",
      "    return min(higher) if higher else max(lower) if lower else None",
      "above preferred to below"),
    M("load", V + "load.py",
      "    if wanted in builds or overridden:",
      "    if wanted in builds:",
      "an override falls back like torch's version"),
    M("load", V + "load.py",
      "    same = [v for v in builds if v[0] == wanted[0]]",
      "    same = list(builds)",
      "a build of another major picked"),
    M("load", V + "load_compilers.py",
      "else min(cc.sm, newest)",
      "else max(cc.sm, newest)",
      "compiler asked for the newest target, not the GPU's"),
    M("load", V + "load_compilers.py",
      "        if knows and runs is not False:",
      "        if knows or runs is not False:",
      "a target the compiler does not know passes"),
    M("load", V + "load_compilers.py",
      "    if wanted == major or not wanted.isdigit():",
      "    if wanted != major or not wanted.isdigit():",
      "compiler fix: the other major's wheel swapped"),
    M("load", V + "load.py",
      '"unknown" if system is None or unread else "fails"',
      '"unknown" if system is None else "fails"',
      "a missing library fails even when a toolkit was unread"),
    # --- dlopen(3)'s search for a library's run-time sonames, companions' PEP 508 ranges
    M("load", V + "dlopen.py",
      "            if _family(name) in found_families:",
      "            if name in found_families:",
      "dlopen: a soname missing though another version of it is found"),
    M("load", V + "loadcommon.py",
      "            directory = directory.replace(origin, here)",
      "            directory = directory.replace(origin, '/')",
      "dlopen and the load model: $ORIGIN not the library's own directory"),
    M("load", V + "dlopen.py",
      'status: Status = "fails" if sure and required and name in required[0] else "unknown"',
      'status: Status = "fails" if required and name in required[0] else "unknown"',
      "dlopen: a required library fails though a search directory was not read"),
    M("load", V + "dlopen.py",
      "        own in (b.needed or ()) and name in (b.needed or ()) for b in elves",
      "        name in (b.needed or ()) for b in elves",
      "dlopen: loaded beside a library that does not load the caller"),
    M("load", V + "dlopen.py",
      "    return loader is not None and name in loader.names",
      "    return loader is None or name in loader.names",
      "dlopen: an unread loader counted as finding it"),
    M("load", V + "companions.py",
      "            if req.specifier.contains(have, prereleases=True):",
      "            if req.specifier.contains(have, prereleases=False):",
      "companion: a pre-release inside the range counted outside"),
    M("load", V + "companions.py",
      "if companion is None or not companion.native_files or not req.specifier:",
      "if companion is None or not req.specifier:",
      "companion: a pure-Python companion out of range blocks"),
    M("load", V + "companions.py",
      '            if name == wanted or name.startswith(wanted + "-"):',
      '            if name.startswith(wanted):',
      "companion: an import joined to a requirement of a longer name"),
    # --- explain's rules
    M("explain", R + "capability.py",
      'needs.group(1) == ">=" and version_of(cc) < version_of(needs.group(2)):',
      'needs.group(1) == ">=" and version_of(cc) <= version_of(needs.group(2)):',
      "a GPU exactly at a package's minimum is older"),
    M("explain", R + "capability.py",
      "    return bool(family) and version_of(wanted) < version_of(cc)",
      "    return bool(family) and version_of(wanted) > version_of(cc)",
      "family gate: older and newer member swapped"),
    M("explain", R + "capability.py",
      "    if need is not None and version_of(cc) < version_of(need):",
      "    if need is not None and version_of(cc) > version_of(need):",
      "an instruction's target: a GPU older than it read as new enough"),
    M("explain", "analysis/explain/gates.py",
      "        if last is None or _key(last) >= _key(cuda):",
      "        if last is None:",
      "a CUDA release that still targets the GPU read as dropping it"),
    M("explain", R + "kernel_image.py",
      "    if last is not None and kb.long_dropped(last):",
      "    if last is not None:",
      "no kernel image: Maxwell (dropped by 13.0) counted as long dropped"),
    M("explain", R + "nvrtc.py",
      "    if have and version_of(have) >= version_of(first):",
      "    if have and version_of(have) > version_of(first):",
      "CuPy: NVRTC of exactly the first CUDA for the target"),
    M("explain", R + "ptx.py",
      "if version_of(r.ptx_isa) >= wanted), None)",
      "if version_of(r.ptx_isa) > wanted), None)",
      "PTX ISA: the toolkit that first emits it skipped"),
    M("explain", R + "tensorrt.py",
      "    return bool((have and last and have > last) or (not have and last",
      "    return bool((have and last and have >= last) or (not have and last",
      "TensorRT: its last release for the GPU counted as dropped"),
    M("explain", R + "toolkit.py",
      "    if have and last and version_of(have) > version_of(last):",
      "    if have and last and version_of(have) >= version_of(last):",
      "toolkit exactly at a target's last CUDA counted as newer"),
    M("explain", R + "toolkit.py",
      "    if have and version_of(have) < version_of(first):",
      "    if have and version_of(have) <= version_of(first):",
      "toolkit exactly at a target's first CUDA counted as older"),
    M("explain", TK,
      '    return major_minor(load_json("toolkits.json")["long_dropped"]["before"]) or (0, 0)',
      "    return (11, 0)",
      "'long dropped' threshold one major lower"),
    M("explain", TK,
      "    return last is not None and (major_minor(last) or (0, 0)) < long_dropped_before()",
      "    return last is not None and (major_minor(last) or (0, 0)) <= long_dropped_before()",
      "'long dropped': a last toolkit exactly at the threshold counted"),
    M("explain", R + "toolkit.py",
      "        if last and not kb.long_dropped(last):",
      "        if last:",
      "toolkit: a target 13.0 dropped taken as long dropped"),
    M("explain", R + "torch_archs.py",
      "if b[0] == cc[0] and b[1] <= cc[1]]",
      "if b[0] == cc[0] and b[1] < cc[1]]",
      "torch arch list: its own minor does not run"),
    M("explain", R + "torch_archs.py",
      "    if cc < built[0]:",
      "    if cc <= built[0]:",
      "torch arch list: the oldest entry itself older"),
    M("explain", R + "torch_archs.py",
      "    if built and version_of(built) < version_of(first):",
      "    if built and version_of(built) <= version_of(first):",
      "torch built with exactly a target's first CUDA counted as older"),
    M("explain", R + "torch_archs.py",
      "    if built and last and version_of(built) > version_of(last):",
      "    if built and last and version_of(built) >= version_of(last):",
      "torch built with exactly a target's last CUDA counted as dropping it"),
    M("explain", R + "torch_archs.py",
      "    if runs and not facts.tegra:",
      "    if runs:",
      "torch arch list: a Tegra GPU served by desktop SASS"),
    # --- fix ranking and FlashInfer's model
    M("fixes", "analysis/fixes/engine.py",
      "    return (cc.major, cc.minor) >= minimum",
      "    return (cc.major, cc.minor) > minimum",
      "FlashInfer on its own minimum 7.5 refused"),
    M("fixes", "analysis/fixes/engine.py",
      '    if not digits or variant not in ("", "a", "f"):',
      '    if not digits or variant not in ("", "a"):',
      "a family target never runs"),
    M("fixes", "analysis/fixes/engine.py",
      '    for suffix in ("a", "f"):',
      '    for suffix in ("a",):',
      "the arch-list fix never offers a family target"),
    M("fixes", "analysis/fixes/flashinfer_rules.py",
      "if have is not None and need is not None and have >= need:",
      "if have is not None and need is not None and have > need:",
      "FlashInfer normalise: nvcc exactly at the needed CUDA"),
    M("fixes", "analysis/fixes/flashinfer_rules.py",
      "        if step.major_min is not None and major < step.major_min:",
      "        if step.major_min is not None and major <= step.major_min:",
      "FlashInfer normalise: its first major skipped"),
    M("fixes", "analysis/fixes/flashinfer_rules.py",
      'if rng.sm107_to_100f and target == "compute_107a" and lacks_107:',
      'if rng.sm107_to_100f and target == "compute_107a":',
      "FlashInfer 0.7.4: 10.7 as 100f even when nvcc builds 107a"),
    # --- JIT models
    M("jit", "analysis/jit/triton.py",
      "    use_blackwell = major >= rules.blackwell_from_major and bool(",
      "    use_blackwell = major > rules.blackwell_from_major and bool(",
      "Triton on a 10.x GPU: its Blackwell ptxas ignored"),
    M("jit", "analysis/jit/triton.py",
      "{'a' if (cc.major, cc.minor) >= suffix_from else ''}",
      "{'a' if (cc.major, cc.minor) > suffix_from else ''}",
      "Triton: 9.0 without its 'a' suffix"),
    M("jit", "analysis/jit/triton.py",
      "    if (cc.major, cc.minor) < refused:",
      "    if (cc.major, cc.minor) <= refused:",
      "Triton refuses its own lowest capability"),
    M("jit", "analysis/jit/triton.py",
      "    if (cc.major, cc.minor) < supported:",
      "    if (cc.major, cc.minor) <= supported:",
      "Triton: its supported minimum called unsupported"),
    M("jit", "analysis/jit/torch_ext.py",
      'variant = minor[1:] if minor[1:] in ("a", "f") else ""',
      'variant = minor[1:] if minor[1:] in ("a",) else ""',
      "TORCH_CUDA_ARCH_LIST: 'f' read as plain"),
    M("jit", "analysis/jit/torch_ext.py",
      "    return entry.ptx and ptx_jits_on(entry.arch, entry.variant, cc)",
      "    return ptx_jits_on(entry.arch, entry.variant, cc)",
      "an entry without +PTX counted as PTX"),
    M("jit", "analysis/jit/runtime_compilers.py",
      "isa is not None and _isa(have) < _isa(isa):",
      "isa is not None and _isa(have) <= _isa(isa):",
      "run-time compiler: a driver of exactly its PTX ISA refused"),
    M("jit", "analysis/jit/runtime_compilers.py",
      'status: JitStatus = "fails" if compiler.kind == "nvrtc" else "unknown"',
      'status: JitStatus = "fails"',
      "run-time compiler: NVPTX's newest ISA taken as what it emits"),
    M("jit", "analysis/jit/runtime_compilers.py",
      "    if gpu in compiler.targets:",
      "    if any(t >= gpu for t in compiler.targets):",
      "run-time compiler: a newer target counted as the GPU's own"),
    # --- the fix writer
    M("writer", "probe/actions/journal.py",
      '    if original is None or sha256(original) != record["before"]:',
      "    if original is None:",
      "a damaged backup restored"),
    M("writer", "probe/actions/fixer.py",
      '        if "planned_sha256" in edit and now != edit["planned_sha256"]:',
      '        if "planned_sha256" in edit and now is not None and now != edit["planned_sha256"]:',
      "a file deleted since the plan is written"),
    M("writer", "probe/actions/journal.py",
      '        elif state == "pending" and now == record["after"]:',
      '        elif state == "pending":',
      "recover: a pending change completed whatever the file holds"),
    M("writer", "probe/actions/journal.py",
      "    if refused and not force:",
      "    if refused and force:",
      "undo: files changed since restored without --force"),
    M("writer", "probe/actions/journal.py",
      "if found is not None and (found.st_uid, found.st_gid) == recorded:",
      "if found is not None:",
      "restore keeps another owner"),
    # --- the archive caps
    M("archives", "archives/limits.py",
      "    if size > RATIO_MIN and size > MAX_RATIO * compressed:",
      "    if size > RATIO_MIN or size > MAX_RATIO * compressed:",
      "ratio refused below RATIO_MIN"),
    M("archives", "archives/limits.py",
      "    if size > RATIO_MIN and size > MAX_RATIO * compressed:",
      "    if size > RATIO_MIN and size > 2 * MAX_RATIO * compressed:",
      "ratio limit doubled"),
    M("archives", "archives/limits.py",
      "        if why is None and self.total + size > MAX_INFLATED:",
      "        if why is None and self.total > MAX_INFLATED:",
      "archive total: the member's own size not counted"),
    M("archives", "archives/limits.py",
      "max(RATIO_MIN, MAX_RATIO * compressed)",
      "max(RATIO_MIN, 2 * MAX_RATIO * compressed)",
      "stream allowance doubled"),
    M("archives", "archives/limits.py",
      "    allowed = min(\n        max(LAYER_MAX_INFLATED",
      "    allowed = max(\n        max(LAYER_MAX_INFLATED",
      "layer allowance: the ratio bound dropped"),
    M("archives", "archives/limits.py",
      "max(LAYER_MAX_INFLATED, LAYER_SIZE_FACTOR * compressed)",
      "max(LAYER_MAX_INFLATED, 1 * compressed)",
      "layer allowance: the size factor dropped"),
    M("archives", "archives/limits.py",
      "        if self.given + size > self.allowed:",
      "        if self.given + size > self.allowed + 1:",
      "claim: one byte past the allowance accepted"),
    M("archives", "archives/limits.py",
      "        if self.given > self.allowed:",
      "        if self.given > self.allowed + 1:",
      "read: one byte past the allowance accepted"),
)  # fmt: skip


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _tests_of(base: Path, subject: str) -> list[str]:
    boundaries = [str(p.relative_to(base)) for p in base.glob("tests/unit/test_boundaries_*.py")]
    return [t for t in (*TESTS[subject], *sorted(boundaries)) if (base / t).is_file()]


def _copy(base: Path, rev: str | None) -> None:
    """``src/``, ``tests/`` and ``pyproject.toml`` of ``rev`` (None: the working tree) under
    ``base``; the test data (ignored by git) linked from the working tree."""
    if rev is None:
        skip = shutil.ignore_patterns("__pycache__", "*.egg-info", ".data")
        shutil.copytree(SRC, base / "src", ignore=skip)
        shutil.copytree(ROOT / "tests", base / "tests", ignore=skip)
        shutil.copy2(ROOT / "pyproject.toml", base / "pyproject.toml")
    else:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", rev, "src", "tests", "pyproject.toml"],
            capture_output=True,
            check=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
    if (ROOT / "tests" / ".data").exists():
        (base / "tests" / ".data").symlink_to(ROOT / "tests" / ".data")


def check(src: Path = SRC) -> list[str]:
    """Every mutation whose original snippet does not occur exactly once."""
    bad = []
    for m in MUTATIONS:
        text = (src / "archgap" / m.file).read_text()
        count = text.count(m.original)
        if count != 1:
            bad.append(f"{m.ident}: original occurs {count} times in {m.file}")
        if m.original == m.mutated:
            bad.append(f"{m.ident}: the mutation changes nothing")
    return bad


def _run(base: Path, tests: list[str]) -> tuple[bool, float, str]:
    """(passed, seconds, last line) of the tests of ``base`` against its ``src``."""
    env = dict(os.environ, PYTHONPATH=str(base / "src"), PYTHONDONTWRITEBYTECODE="1")
    argv = [str(PYTHON), "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests]
    start = time.monotonic()
    try:
        done = subprocess.run(
            argv, cwd=base, env=env, capture_output=True, text=True, timeout=TIMEOUT
        )
    except subprocess.TimeoutExpired:
        return False, time.monotonic() - start, f"timed out after {TIMEOUT} s"
    lines = (done.stdout + done.stderr).strip().splitlines()
    return done.returncode == 0, time.monotonic() - start, lines[-1] if lines else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[], help="subjects or id substrings")
    parser.add_argument("--rev", default="HEAD", help="the commit to copy (default HEAD)")
    parser.add_argument("--worktree", action="store_true", help="copy the working tree instead")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rev = None if args.worktree else args.rev
    if rev is not None:  # the commit itself: HEAD moves while others commit
        rev = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", rev],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    chosen = [
        m
        for m in MUTATIONS
        if not args.only or any(o == m.subject or o in m.ident for o in args.only)
    ]
    results: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="archgap-mutations-") as tmp:
        base = Path(tmp)
        _copy(base, rev)
        bad = check(base / "src")
        for line in bad:
            print(line)
        if args.check or bad:
            print(f"{len(MUTATIONS)} mutations, {len(bad)} bad snippets")
            return 1 if bad else 0
        started = _load()
        print(
            f"{len(chosen)} mutations of {rev or 'the working tree'}; load average at start: "
            f"{started}",
            flush=True,
        )
        broken: set[str] = set()
        for subject in dict.fromkeys(m.subject for m in chosen):
            passed, seconds, last = _run(base, _tests_of(base, subject))
            print(f"baseline {subject}: {'ok' if passed else 'FAILS'} ({seconds:.0f} s) {last}")
            if not passed:
                broken.add(subject)
        for m in chosen:
            if m.subject in broken:
                continue
            path = base / "src" / "archgap" / m.file
            original = path.read_text()
            path.write_text(original.replace(m.original, m.mutated, 1))
            try:
                passed, seconds, last = _run(base, _tests_of(base, m.subject))
            finally:
                path.write_text(original)
            status = "survived" if passed else "killed"
            print(f"{status:8} {seconds:5.0f} s  {m.ident}", flush=True)
            results.append({"id": m.ident, "subject": m.subject, "status": status, "last": last})
    ended = _load()
    print(f"\nload average at end: {ended}")
    subjects = dict.fromkeys(str(r["subject"]) for r in results)
    total = sum(r["status"] == "killed" for r in results)
    for subject in subjects:
        mine = [r for r in results if r["subject"] == subject]
        killed = sum(r["status"] == "killed" for r in mine)
        print(f"{subject:10} {killed:3}/{len(mine):<3} killed ({100 * killed // len(mine)} %)")
    if results:
        print(f"{'all':10} {total:3}/{len(results):<3} killed ({100 * total // len(results)} %)")
    for r in results:
        if r["status"] == "survived":
            print(f"survived: {r['id']}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"rev": rev, "load_start": started, "load_end": ended, "results": results},
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
