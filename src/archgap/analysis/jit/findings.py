"""What the JIT compilers in the stack will do on first use: pure functions over facts + kb.

One small resolver per package, each modelled on that package's real code for its installed
version (rules and messages in kb/jit.json, with sources): FlashInfer (``analysis.jit.flashinfer``:
which nvcc it asks, how it normalises the GPU's arch, FLASHINFER_CUDA_ARCH_LIST), Triton
(``analysis.triton``: its ptxas vs the GPU's target), and here torch C++ extensions
(TORCH_CUDA_ARCH_LIST, torch's CUDA vs nvcc's) and torch itself (its CUDA runtime vs the driver).
This module holds what they share: the finding, its chain of facts, and which nvcc a package
resolves; ``analysis.compilers`` asks every model. A finding carries the error the user will
see, the cause, the chain of facts with where each came from, and fixes naming real options
found on the machine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from archgap.analysis.fixes.engine import Fix, worded
from archgap.analysis.jit import torch_ext
from archgap.analysis.verdicts.compat import GpuTarget
from archgap.kb import toolchain as kb
from archgap.probe.facts import SourceCheck, ToolchainFacts, Toolkit, TorchBuild

# blocked: the environment cannot run on that GPU's systems (analysis.verdicts.platform)
JitStatus = Literal["ok", "fails", "unknown", "blocked"]


@dataclass(frozen=True)
class Fact:
    """One link of the chain, and where it came from (file, command, env var and whose env)."""

    what: str
    source: str


@dataclass(frozen=True)
class JitFinding:
    package: str
    version: str
    gpu: str | None  # the GPU target's label; None when the finding holds for every GPU
    compute_capability: str | None
    status: JitStatus
    error: str | None  # the exact text the user will see, when known
    cause: str  # one sentence
    chain: tuple[Fact, ...]
    fixes: tuple[Fix, ...]
    when: str  # when it happens: "at the first FlashInfer JIT call", ...
    gates_exit_code: bool = False


def gpu_finding(
    package: str,
    version: str,
    target: GpuTarget,
    status: JitStatus,
    error: str | None,
    cause: str,
    chain: Sequence[Fact],
    fixes: Sequence[Fix],
    when: str,
) -> JitFinding:
    """A finding for one GPU target: its label, compute capability and whether it gates the exit
    code come from the target."""
    return JitFinding(
        package=package,
        version=version,
        gpu=target.label,
        compute_capability=str(target.compute_capability),
        status=status,
        error=error,
        cause=cause,
        chain=tuple(chain),
        fixes=tuple(fixes),
        when=when,
        gates_exit_code=target.gates_exit_code,
    )


def driver_finding(
    package: str,
    version: str,
    cause: str,
    chain: Sequence[Fact],
    fixes: Sequence[Fix],
    when: str,
    gates_exit_code: bool,
) -> JitFinding:
    """A CUDA runtime the driver cannot run: for every GPU, failing with the error the CUDA
    runtime raises at initialisation."""
    return JitFinding(
        package=package,
        version=version,
        gpu=None,
        compute_capability=None,
        status="fails",
        error=kb.jit_rules().torch_driver_error,
        cause=cause,
        chain=tuple(chain),
        fixes=tuple(fixes),
        when=when,
        gates_exit_code=gates_exit_code,
    )


def blocked_on(findings: Sequence[JitFinding], causes: Mapping[str, str]) -> tuple[JitFinding, ...]:
    """The findings, each for a GPU in ``causes`` (GPU label -> why the environment cannot run
    on its systems: ``analysis.verdicts.platform.jit_blocked``) made ``blocked`` with that
    cause: no error predicted and no fix, since no JIT of this environment runs there. Findings
    for every GPU (a CUDA runtime the driver cannot run) are kept."""
    return tuple(
        replace(f, status="blocked", error=None, cause=causes[f.gpu], fixes=())
        if f.gpu is not None and f.gpu in causes
        else f
        for f in findings
    )


# --- toolkit resolution ---------------------------------------------------------------------


@dataclass(frozen=True)
class ResolvedNvcc:
    """The toolkit a package's lookup lands on, and the facts of the lookup."""

    toolkit: Toolkit | None
    chain: tuple[Fact, ...]


def _env(facts: ToolchainFacts, name: str) -> str | None:
    return next((v.value for v in facts.env if v.name == name), None)


def _candidate(facts: ToolchainFacts, found_by: str) -> Toolkit | None:
    return next((t for t in facts.toolkits if t.found_by == found_by and t.tool == "nvcc"), None)


def resolve_nvcc(facts: ToolchainFacts, lookup: Sequence[str]) -> ResolvedNvcc:
    """Follow ``lookup`` (CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda) like the package does."""
    chain: list[Fact] = []
    whose = facts.env_source
    for step in lookup:
        if step in ("CUDA_HOME", "CUDA_PATH"):
            value = _env(facts, step)
            if not value:  # `os.environ.get(...) or ...`: unset and empty both fall through
                chain.append(Fact(f"{step} is not set", f"environment ({whose})"))
                continue
            chain.append(Fact(f"{step}={value}", f"env {step} ({whose})"))
            return ResolvedNvcc(_candidate(facts, step), tuple(chain))
        if step == "PATH":
            if facts.which_nvcc:
                chain.append(
                    Fact(f"nvcc on PATH: {facts.which_nvcc}", f"`which nvcc` with PATH ({whose})")
                )
                return ResolvedNvcc(_candidate(facts, "PATH"), tuple(chain))
            chain.append(Fact("no nvcc on PATH", f"`which nvcc` with PATH ({whose})"))
            continue
        chain.append(Fact(f"falls back to {step}", "the package's default location"))
        return ResolvedNvcc(_candidate(facts, step), tuple(chain))
    return ResolvedNvcc(None, tuple(chain))


def _toolkit_fact(tk: Toolkit) -> Fact:
    if tk.status == "ok":
        return Fact(f"{tk.tool_path} reports CUDA {tk.version} ({tk.banner})", tk.version_from)
    return Fact(f"{tk.tool_path}: {tk.status} ({tk.reason})", tk.version_from)


def _ok_nvcc_toolkits(facts: ToolchainFacts) -> list[Toolkit]:
    """Distinct working nvcc toolkits on the machine (first report of each home wins)."""
    seen: set[str] = set()
    found = []
    # Versioned directories first: /usr/local/cuda-13.0 says more than the /usr/local/cuda link.
    ordered = sorted(facts.toolkits, key=lambda t: t.found_by != "/usr/local/cuda-*")
    for tk in ordered:
        key = tk.real_home or tk.home
        # A PATH hit's home is dirname(dirname(nvcc)): often a wrapper in /usr/local/bin, not a
        # toolkit root with headers, so it is not offered as a CUDA_HOME.
        usable = tk.tool == "nvcc" and tk.status == "ok" and tk.found_by != "PATH"
        if usable and tk.version and key not in seen:
            seen.add(key)
            found.append(tk)
    return found


def _ok_ptxas(facts: ToolchainFacts) -> list[tuple[str, str]]:
    """(ptxas path, CUDA version) of every working assembler on the machine."""
    found: dict[str, str] = {}
    for tk in facts.toolkits:
        if tk.status != "ok" or not tk.version or not tk.tool_path:
            continue
        if tk.tool.startswith("ptxas"):
            found.setdefault(tk.tool_path, tk.version)
        elif tk.tool == "nvcc" and tk.found_by != "PATH":
            found.setdefault(tk.home.rstrip("/") + "/bin/ptxas", tk.version)
    return list(found.items())


def _source_facts(
    facts: ToolchainFacts, checks: Sequence[dict[str, str]]
) -> tuple[list[Fact], list[str]]:
    """Chain facts for the source lines a rule depends on, and the keys NOT found."""
    out: list[Fact] = []
    missing: list[str] = []
    by_needle: dict[str, SourceCheck] = {c.needle: c for c in facts.source_checks}
    for check in checks:
        found = by_needle.get(check["needle"])
        if found is None:
            out.append(Fact(f"not checked: {check['file']} ({check['key']})", "probe"))
            missing.append(check["key"])
        elif found.found:
            out.append(
                Fact(f"confirmed in installed source: {found.needle}", f"{found.file}:{found.line}")
            )
        else:
            why = found.reason or "not found"
            out.append(
                Fact(
                    f"NOT in installed source ({why}): {found.needle} — fork or patched build?",
                    found.file,
                )
            )
            missing.append(check["key"])
    return out, missing


# --- torch C++ extensions and torch itself --------------------------------------------------


def torch_findings(
    facts: ToolchainFacts,
    targets: Sequence[GpuTarget],
    driver_version: str | None,
    driver_source: str = "nvidia-smi",
) -> list[JitFinding]:
    torch = facts.torch
    if torch is None or not torch.cuda:
        return []
    rules = kb.jit_rules().torch_ext
    gates = any(t.gates_exit_code for t in targets)
    base = [Fact(f"torch {torch.version or '?'} built with CUDA {torch.cuda}", torch.file)]
    resolved = resolve_nvcc(facts, rules.cuda_home_lookup)
    tk = resolved.toolkit
    findings: list[JitFinding] = []
    if tk is not None and tk.status == "ok" and tk.version:
        findings.extend(_major_mismatch(facts, torch, tk, resolved.chain, base, gates))
    arch_list = _env(facts, rules.arch_env)
    if arch_list:
        nvcc = tk.version if tk is not None and tk.status == "ok" else None
        findings.extend(_arch_list_findings(facts, torch, arch_list, targets, nvcc, base))
    if driver_version:
        findings.extend(_torch_driver(torch, (driver_version, driver_source), base, gates))
    return findings


def _major_mismatch(
    facts: ToolchainFacts,
    torch: TorchBuild,
    tk: Toolkit,
    lookup: Sequence[Fact],
    base: list[Fact],
    gates: bool,
) -> list[JitFinding]:
    """torch refuses to build extensions with an nvcc (``tk``, found by ``lookup``) of another
    CUDA major than its own; the fixes point CUDA_HOME at a toolkit here of torch's major."""
    rules = kb.jit_rules().torch_ext
    have, want = kb.major_minor(tk.version or ""), kb.major_minor(torch.cuda or "")
    if not (have and want and have[0] != want[0]):
        return []
    fixes = [
        worded(
            "torch-ext-cuda-home",
            kind="",
            env=(("CUDA_HOME", t.home),),
            home=t.home,
            nvcc=t.version,
            origin=t.origin,
        )
        for t in _ok_nvcc_toolkits(facts)
        if (kb.major_minor(t.version or "") or (0, 0))[0] == want[0] and t.home != tk.home
    ]
    finding = JitFinding(
        package="torch (C++ extensions)",
        version=torch.version or "?",
        gpu=None,
        compute_capability=None,
        status="fails",
        error="RuntimeError: " + rules.mismatch_message.format(nvcc=tk.version, torch=torch.cuda),
        cause=f"nvcc {tk.version} (found through {tk.found_by}) and torch's CUDA "
        f"{torch.cuda} differ in major version; torch refuses to build extensions.",
        chain=(
            *base,
            *lookup,
            _toolkit_fact(tk),
            Fact("major mismatch raises", rules.mismatch_source),
        ),
        fixes=tuple(fixes),
        when="when a torch C++/CUDA extension is built (torch.utils.cpp_extension, pip source "
        "builds)",
        gates_exit_code=gates,
    )
    return [finding]


def _torch_driver(
    torch: TorchBuild, driver: tuple[str, str], base: list[Fact], gates: bool
) -> list[JitFinding]:
    """torch's CUDA runtime on a driver (version, source) too old for it: fails at CUDA init."""
    driver_version, driver_source = driver
    ok, rule = kb.driver_runs_runtime(driver_version, torch.cuda or "")
    if ok is not False:
        return []
    fix = worded("torch-driver-upgrade", kind="")
    return [
        driver_finding(
            "torch",
            torch.version or "?",
            f"torch's CUDA {torch.cuda} runtime needs a newer driver than {driver_version}.",
            (*base, Fact(f"driver {driver_version}", driver_source), Fact(rule, "kb/drivers.json")),
            (fix,),
            "at CUDA initialisation (the first torch.cuda call)",
            gates,
        )
    ]


def _arch_list_findings(
    facts: ToolchainFacts,
    torch: TorchBuild,
    arch_list: str,
    targets: Sequence[GpuTarget],
    nvcc: str | None,
    base: Sequence[Fact],
) -> list[JitFinding]:
    """TORCH_CUDA_ARCH_LIST against torch's parser, the nvcc found and each GPU."""
    rules = kb.jit_rules().torch_ext
    version = torch.version or "?"
    gates = any(t.gates_exit_code for t in targets)
    when = "when a torch C++/CUDA extension is built (torch.utils.cpp_extension, pip source builds)"
    parsed = torch_ext.parse_arch_list(arch_list, torch)
    chain = (
        *base,
        Fact(f"TORCH_CUDA_ARCH_LIST={arch_list!r}", f"env ({facts.env_source})"),
        Fact(f"accepted names: {' '.join(parsed.valid)}", parsed.valid_source),
    )

    def finding(
        status: JitStatus,
        error: str,
        cause: str,
        fixes: Sequence[Fix],
        gpu: GpuTarget | None,
        gate: bool,
    ) -> JitFinding:
        return JitFinding(
            package="torch (C++ extensions)",
            version=version,
            gpu=gpu.label if gpu else None,
            compute_capability=str(gpu.compute_capability) if gpu else None,
            status=status,
            error=error,
            cause=cause,
            chain=chain,
            fixes=tuple(fixes),
            when=when,
            gates_exit_code=gate,
        )

    if parsed.unknown:
        token = parsed.unknown[0]
        names = " ".join(sorted({f"{t.compute_capability}" for t in targets}))
        fix = worded("torch-ext-arch-names", kind="env", names=names)
        status: JitStatus = "fails" if parsed.definitive else "unknown"
        arch = token.removesuffix("+PTX")
        return [
            finding(
                status,
                "ValueError: " + rules.unknown_arch_message.format(arch=arch),
                f"TORCH_CUDA_ARCH_LIST entry {token!r} is not a name torch {version} accepts.",
                (fix,),
                None,
                gates and parsed.definitive,
            )
        ]
    out = []
    bad = torch_ext.unbuildable(parsed.entries, nvcc) if nvcc else []
    if bad and nvcc:
        out.append(
            finding(
                "fails",
                kb.jit_rules().flashinfer.nvcc_unsupported_arch.format(target=bad[0].target[8:]),
                f"nvcc {nvcc} cannot build {', '.join(e.target for e in bad)} from "
                "TORCH_CUDA_ARCH_LIST: the extension build fails.",
                torch_ext.drop_or_toolkit_fixes(bad, nvcc),
                None,
                gates,
            )
        )
    for target in targets:
        if any(torch_ext.serves(e, target) for e in parsed.entries):
            continue
        out.append(
            finding(
                "fails",
                "CUDA error: no kernel image is available for execution on the device",
                f"TORCH_CUDA_ARCH_LIST={arch_list!r} builds no SASS that runs on "
                f"{target.compute_capability} and no PTX for it: "
                + ", ".join(e.target for e in parsed.entries),
                torch_ext.exact_entry_fix(target, parsed.valid, nvcc),
                target,
                target.gates_exit_code,
            )
        )
    return out


def runtime_findings(
    toolkits: Sequence[Toolkit], driver_version: str | None, driver_source: str, gates: bool
) -> list[JitFinding]:
    """Each CUDA runtime wheel (cudart, nvrtc) among ``toolkits`` the driver cannot run
    (minor-version rules); ``gates``: whether such a failure gates the exit code."""
    if not driver_version:
        return []
    findings = []
    seen: set[tuple[str, str]] = set()
    for tk in toolkits:
        if tk.component not in ("runtime", "nvrtc") or not tk.version:
            continue
        if (tk.component, tk.version) in seen:
            continue
        seen.add((tk.component, tk.version))
        ok, rule = kb.driver_runs_runtime(driver_version, tk.version)
        if ok is not False:
            continue
        name = "nvidia-cuda-runtime" if tk.component == "runtime" else "nvidia-cuda-nvrtc"
        findings.append(
            driver_finding(
                name,
                tk.full_version or tk.version,
                f"the CUDA {tk.version} {tk.component} in this environment needs a newer "
                f"driver than {driver_version} ({rule}).",
                (
                    Fact(f"{name} {tk.full_version or tk.version}", tk.version_from),
                    Fact(f"driver {driver_version}", driver_source),
                    Fact(rule, "kb/drivers.json"),
                ),
                (
                    worded("cuda-runtime-driver-upgrade", kind="upgrade", cuda=tk.version),
                    worded("cuda-runtime-older-cuda", kind="upgrade"),
                ),
                "at CUDA initialisation (the first CUDA call of any package using it)",
                gates,
            )
        )
    return findings
