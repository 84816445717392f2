"""What FlashInfer will do on first use (kb/jit.json ``flashinfer``, per release range): which
nvcc it asks, how it normalises the GPU's arch, how it reads FLASHINFER_CUDA_ARCH_LIST, which
targets its JIT build emits, and the fix engine's answer for each exact GPU."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from archgap.analysis.fixes.engine import (
    Fix,
    FlashinferCase,
    flashinfer_fixes,
    flashinfer_supports,
    runs_on,
)
from archgap.analysis.fixes.flashinfer_rules import (
    build_target,
    normalise_arch,
    parse_flashinfer_arch_list,
    target_name,
)
from archgap.analysis.jit.findings import (
    Fact,
    JitFinding,
    JitStatus,
    _env,
    _ok_nvcc_toolkits,
    _source_facts,
    _toolkit_fact,
    gpu_finding,
    resolve_nvcc,
)
from archgap.analysis.verdicts.compat import GpuTarget
from archgap.kb import toolchain as kb
from archgap.probe.facts import ToolchainFacts, Toolkit


def _target(major: int, minor_text: str) -> str:
    return target_name(major, minor_text)


def _runs_on(major: int, minor_text: str, target: GpuTarget) -> bool:
    return runs_on(major, minor_text, target.compute_capability)


def _flashinfer_fixes(
    facts: ToolchainFacts,
    version: str,
    target: GpuTarget,
    current_cuda: str | None,
    current_home: str | None,
    driver: str | None = None,
    no_nvcc: str | None = None,
) -> tuple[Fix, ...]:
    """The fix engine's answer for this exact GPU with the toolkits found on the machine and
    the driver present or named."""
    case = FlashinferCase(
        version,
        target.compute_capability,
        current_cuda,
        current_home,
        tuple(_ok_nvcc_toolkits(facts)),
        facts.torch.cuda if facts.torch else None,
        driver,
        no_nvcc,
    )
    return flashinfer_fixes(case)


def _unusable(tk: Toolkit | None) -> str:
    """Why the nvcc FlashInfer resolves gives no version: "no nvcc found", or its path and state."""
    return "no nvcc found" if tk is None else f"{tk.tool_path}: {tk.status} ({tk.reason})"


def _no_nvcc(facts: ToolchainFacts, tk: Toolkit | None) -> str | None:
    """The CUDA_HOME (or CUDA_PATH) FlashInfer resolves when it holds no bin/nvcc ("CUDA_HOME=/x
    has no bin/nvcc (ptxas only): nothing can build there"); None otherwise. FlashInfer runs
    $CUDA_HOME/bin/nvcc (jit/cpp_ext.py): a home with ptxas alone (the nvidia-cuda-nvcc-cu12
    wheel's layout) cannot compile a .cu file."""
    if tk is None or tk.status != "missing" or tk.found_by not in ("CUDA_HOME", "CUDA_PATH"):
        return None
    homes = {tk.home.rstrip("/"), (tk.real_home or tk.home).rstrip("/")}
    ptxas = any(
        t.tool.startswith("ptxas") and t.tool_path and t.status == "ok"
        and {t.home.rstrip("/"), (t.real_home or t.home).rstrip("/")} & homes
        for t in facts.toolkits
    )  # fmt: skip
    only = " (ptxas only)" if ptxas else ""
    return f"{tk.found_by}={tk.home} has no bin/nvcc{only}: nothing can build there"


def flashinfer_findings(
    facts: ToolchainFacts,
    targets: Sequence[GpuTarget],
    driver: str | None = None,
    wheel: bool = False,
) -> list[JitFinding]:
    """What FlashInfer does on each GPU with the toolchain of ``facts``; ``driver``: the driver
    present or named (a toolkit switch it cannot run is not offered first). ``wheel``: the
    package is a wheel not yet installed (its ``dist_info`` the wheel): judged by its release's
    rules against this toolchain, its source lines not read."""
    pkg = next((p for p in facts.packages if p.name == "flashinfer-python"), None)
    if pkg is None:
        return []
    rules = kb.jit_rules().flashinfer
    rng = kb.flashinfer_range(pkg.version)
    when = "at the first FlashInfer JIT call (sampling, attention plan, norm, MoE ...)"
    findings: list[JitFinding] = []
    base_chain = [
        Fact(f"flashinfer-python {pkg.version} in the wheel (not installed)", pkg.dist_info)
        if wheel
        else Fact(f"flashinfer-python {pkg.version} installed", f"{pkg.dist_info}/METADATA")
    ]
    if rng is None:
        for target in targets:
            findings.append(
                JitFinding(
                    package="flashinfer-python",
                    version=pkg.version,
                    gpu=target.label,
                    compute_capability=str(target.compute_capability),
                    status="unknown",
                    error=None,
                    cause=f"flashinfer-python {pkg.version} picks architectures through torch; "
                    f"archgap models {rules.first_modelled} and later.",
                    chain=tuple(base_chain),
                    fixes=(),
                    when=when,
                )
            )
        return findings
    resolved = resolve_nvcc(facts, rules.nvcc_lookup)
    chain = [*base_chain, *resolved.chain]
    tk = resolved.toolkit
    cuda: str | None = None
    if tk is not None:
        chain.append(_toolkit_fact(tk))
        if tk.status == "ok":
            cuda = tk.version
    lookup_src = rules.nvcc_lookup_source
    chain.append(Fact("FlashInfer asks that nvcc for the CUDA version (not torch)", lookup_src))
    torch = facts.torch
    if tk is not None and tk.status in ("missing", "broken") and torch and torch.cuda:
        # get_cuda_version falls back to torch.version.cuda when nvcc cannot run.
        cuda = torch.cuda
        chain.append(
            Fact(f"nvcc unusable, FlashInfer falls back to torch.version.cuda = {cuda}", torch.file)
        )
    missing: list[str] = []
    if wheel:
        chain.append(
            Fact(f"judged by the rules of FlashInfer {pkg.version}'s release range", rng.source)
        )
    else:
        src_facts, missing = _source_facts(facts, rng.source_checks)
        chain.extend(src_facts)
    arch_list = _env(facts, rules.arch_env)
    for target in targets:
        findings.append(
            _flashinfer_one(
                facts, pkg.version, rng, target, tk, cuda, arch_list, chain, missing, when, driver
            )
        )
    return findings


@dataclass
class _Case:
    """One GPU's FlashInfer case: what every step of ``_flashinfer_one`` reads, and the chain of
    facts it adds to."""

    facts: ToolchainFacts
    version: str
    rng: kb.FlashinferRange
    target: GpuTarget
    tk: Toolkit | None
    cuda: str | None
    chain: list[Fact]
    missing_source: list[str]
    when: str
    driver: str | None
    no_nvcc: str | None

    def fixes(self, cuda: str | None) -> tuple[Fix, ...]:
        home = self.tk.home if self.tk else None
        return _flashinfer_fixes(
            self.facts, self.version, self.target, cuda, home, self.driver, self.no_nvcc
        )

    def finding(
        self, status: JitStatus, error: str | None, cause: str, fixes: tuple[Fix, ...] = ()
    ) -> JitFinding:
        if status == "fails" and self.missing_source:
            status = "unknown"
            cause += (
                " (Not confirmed: the installed source lacks "
                + ", ".join(self.missing_source)
                + " — a fork or patched build may behave differently.)"
            )
        return gpu_finding(
            "flashinfer-python", self.version, self.target, status, error, cause, self.chain,
            fixes, self.when,
        )  # fmt: skip


def _flashinfer_one(
    facts: ToolchainFacts,
    version: str,
    rng: kb.FlashinferRange,
    target: GpuTarget,
    tk: Toolkit | None,
    cuda: str | None,
    arch_list: str | None,
    base_chain: list[Fact],
    missing_source: list[str],
    when: str,
    driver: str | None = None,
) -> JitFinding:
    cc = target.compute_capability
    chain = [*base_chain, Fact(f"GPU {target.label}: compute capability {cc}", target.source)]
    case = _Case(
        facts, version, rng, target, tk, cuda, chain, missing_source, when, driver,
        _no_nvcc(facts, tk),
    )  # fmt: skip
    refused = _refused(case)
    if refused is not None:
        return refused
    archs = _listed(case, arch_list) if arch_list is not None else _normalised(case)
    if isinstance(archs, JitFinding):
        return archs
    return _built(case, archs)


def _refused(case: _Case) -> JitFinding | None:
    """The GPU below FlashInfer's minimum, or an nvcc that never answers: a failure whatever
    the arch set; None otherwise."""
    cc, tk = case.target.compute_capability, case.tk
    if not flashinfer_supports(cc):
        rules = kb.jit_rules().flashinfer
        case.chain.append(
            Fact("check_cuda_arch() requires sm75 or higher", rules.min_compute_capability_source)
        )
        return case.finding(
            "fails",
            f"RuntimeError: {case.rng.check_message}",
            f"FlashInfer {case.version} does not support sm_{cc.sm} (compute capability {cc}): "
            "check_cuda_arch() rejects it whatever the toolkit; avoid its paths.",
            case.fixes(case.cuda),
        )
    if tk is not None and tk.status == "timeout":
        return case.finding(
            "fails",
            None,
            f"`{tk.tool_path} --version` never returns and FlashInfer runs it without a timeout,"
            " so the process hangs when FlashInfer first asks for the CUDA version.",
            case.fixes(None),
        )
    return None


def _listed(case: _Case, arch_list: str) -> tuple[tuple[int, str], ...] | JitFinding:
    """The targets FLASHINFER_CUDA_ARCH_LIST asks for, or the failure it leads to (it does not
    parse, or asks nothing that runs on the GPU)."""
    case.chain.append(
        Fact(f"FLASHINFER_CUDA_ARCH_LIST={arch_list!r}", f"env ({case.facts.env_source})")
    )
    parsed = parse_flashinfer_arch_list(arch_list, case.rng, case.cuda)
    if parsed.error:
        return case.finding(
            "fails",
            parsed.error,
            f"FLASHINFER_CUDA_ARCH_LIST={arch_list!r} does not parse with FlashInfer "
            f"{case.version}'s parser (space-separated MAJOR.MINOR[a|f]); it raises at import.",
            case.fixes(case.cuda),
        )
    if not any(_runs_on(m, t, case.target) for m, t in parsed.archs):
        return case.finding(
            "fails",
            "CUDA error: no kernel image is available for execution on the device",
            f"FLASHINFER_CUDA_ARCH_LIST={arch_list!r} builds no target that runs on "
            f"compute capability {case.target.compute_capability}.",
            case.fixes(case.cuda),
        )
    return parsed.archs


def _normalised(case: _Case) -> tuple[tuple[int, str], ...] | JitFinding:
    """The target FlashInfer's arch normalisation picks for the GPU, or the failure when it
    raises (swallowed at import; check_cuda_arch() then rejects the GPU)."""
    cc, cuda, tk, version = case.target.compute_capability, case.cuda, case.tk, case.version
    norm = normalise_arch(case.rng, cc.major, cc.minor, cuda)
    if not norm.raises:
        archs = ((cc.major, norm.minor_text or str(cc.minor)),)
        with_cuda = f" with CUDA {cuda}" if cc.major == 12 else ""
        case.chain.append(
            Fact(
                f"FlashInfer {version} normalises {cc} to {_target(*archs[0])}{with_cuda}",
                case.rng.source,
            )
        )
        return archs
    case.chain.append(
        Fact(
            f"_normalize_cuda_arch({cc.major}, {cc.minor}) raises "
            f"RuntimeError({norm.raises!r}) with CUDA {cuda or 'unknown'}; the broad "
            "`except Exception` logs it as a warning and TARGET_CUDA_ARCHS stays empty",
            case.rng.source,
        )
    )
    warning = case.rng.warning.format(error=norm.raises, device_count="N")
    if tk is not None and tk.status == "ok" and cuda:
        why = f"nvcc {cuda} is too old for FlashInfer {version}'s SM {cc.major}.x rule"
    else:
        why = (
            f"{case.no_nvcc or _unusable(tk)}; FlashInfer {version}'s SM {cc.major}.x "
            f"rule, given CUDA {cuda or 'unknown'}, raises"
        )
    return case.finding(
        "fails",
        f"RuntimeError: {case.rng.check_message}",
        f"{why} ({norm.raises}); the error is swallowed at import "
        f"(logged: {warning!r}) and check_cuda_arch() then rejects the GPU.",
        case.fixes(cuda),
    )


def _built(case: _Case, archs: tuple[tuple[int, str], ...]) -> JitFinding:
    """The JIT build: every target goes to nvcc as -gencode=arch=compute_X,code=sm_X; it fails
    without a working nvcc or where that nvcc cannot compile a target."""
    tk, version = case.tk, case.version
    if tk is None or tk.status != "ok" or tk.version is None:
        reason = case.no_nvcc or ("no nvcc found" if tk is None else f"{tk.tool_path}: {tk.status}")
        return case.finding(
            "fails",
            None,
            f"FlashInfer must compile {', '.join(_target(*a) for a in archs)} but {reason}.",
            case.fixes(None),
        )
    built = []
    for major, minor_text in archs:
        tgt = build_target(case.rng, major, minor_text, tk.version)
        if tgt != _target(major, minor_text):
            case.chain.append(
                Fact(
                    f"nvcc {tk.version} cannot build {_target(major, minor_text)}: FlashInfer "
                    f"{version} builds {tgt} instead",
                    case.rng.source,
                )
            )
        built.append(tgt)
        if not kb.toolkit_can_target(tk.version, tgt):
            return _uncompilable(case, tk.version, tgt)
    not_all = ""
    if case.rng.sm107_not_all and "compute_100f" in built and "compute_107a" not in built:
        not_all = (
            f" Not every module: {case.rng.sm107_not_all}, which nvcc {tk.version} cannot compile."
        )
    return case.finding(
        "ok",
        None,
        f"flashinfer-python {version} on {case.target.label}: builds {', '.join(built)} with nvcc "
        f"{tk.version} ({tk.tool_path}), which runs on {case.target.compute_capability}.{not_all}",
    )


def _uncompilable(case: _Case, nvcc: str, tgt: str) -> JitFinding:
    """The arch set is fine but ``nvcc`` cannot compile the target ``tgt``."""
    first = kb.first_toolkit_for(tgt)
    case.chain.append(
        Fact(
            f"nvcc {nvcc} cannot compile {tgt}"
            + (f" (first toolkit: CUDA {first})" if first else ""),
            "kb/toolkits.json",
        )
    )
    return case.finding(
        "fails",
        kb.jit_rules().flashinfer.nvcc_unsupported_arch.format(target=tgt[8:]),
        f"The arch set is fine but the JIT build fails: nvcc {nvcc} cannot "
        f"compile {tgt}" + (f" (needs CUDA >= {first})." if first else "."),
        case.fixes(nvcc),
    )
