"""What the JIT compilers in the stack will do on first use: pure functions over facts + kb.

One small resolver per package, each modelled on that package's real code for its installed
version (rules and messages in kb/jit.json, with sources): FlashInfer (which nvcc it asks, how it
normalises the GPU's arch, FLASHINFER_CUDA_ARCH_LIST), Triton (its ptxas vs the GPU's target),
torch C++ extensions (TORCH_CUDA_ARCH_LIST, torch's CUDA vs nvcc's) and torch itself (its CUDA
runtime vs the driver). A finding carries the error the user will see, the cause, the chain of
facts with where each came from, and fixes naming real options found on the machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from archgap.analysis import torch_ext
from archgap.analysis.compat import GpuTarget
from archgap.analysis.fixes import (
    Fix,
    FlashinferCase,
    flashinfer_fixes,
    flashinfer_supports,
    runs_on,
    target_name,
)
from archgap.kb import toolchain as kb
from archgap.probe.toolkit import (
    SourceCheck,
    ToolchainFacts,
    Toolkit,
    TorchBuild,
)


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
    status: str  # "ok", "fails", "unknown"
    error: str | None  # the exact text the user will see, when known
    cause: str  # one sentence
    chain: tuple[Fact, ...]
    fixes: tuple[Fix, ...]
    when: str  # when it happens: "at the first FlashInfer JIT call", ...
    gates_exit_code: bool = False


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


# --- FlashInfer -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Normalised:
    suffix: str | None  # the suffix nvcc gets for this GPU ("0f" -> minor+suffix below)
    minor_text: str | None  # "0f", "3a"
    raises: str | None  # the RuntimeError message raised instead


def normalise_arch(rng: kb.FlashinferRange, major: int, minor: int, cuda: str | None) -> Normalised:
    """FlashInfer's ``_normalize_cuda_arch`` for one version range, as data."""
    for step in rng.normalise:
        if step.major is not None and step.major != major:
            continue
        if step.major_min is not None and major < step.major_min:
            continue
        if step.minor is not None and step.minor != minor:
            continue
        if step.suffix is not None:
            return Normalised(step.suffix, f"{minor}{step.suffix}", None)
        have = kb.major_minor(cuda) if cuda else None
        for cuda_min, suffix, minor_text in step.needs:
            need = kb.major_minor(cuda_min)
            if have is not None and need is not None and have >= need:
                return Normalised(suffix, minor_text or f"{minor}{suffix}", None)
        return Normalised(None, None, step.raises)
    return Normalised("", str(minor), None)


def build_target(rng: kb.FlashinferRange, major: int, minor_text: str, cuda: str | None) -> str:
    """The -gencode target FlashInfer emits for one (major, minor) of TARGET_CUDA_ARCHS: 0.7.4
    builds SM 10.7 as compute_100f when the nvcc it calls cannot build compute_107a."""
    target = target_name(major, minor_text)
    lacks_107 = cuda is not None and not kb.toolkit_can_target(cuda, target)
    if rng.sm107_to_100f and target == "compute_107a" and lacks_107:
        return "compute_100f"
    return target


@dataclass(frozen=True)
class ArchListParse:
    archs: tuple[tuple[int, str], ...]
    error: str | None  # the exception `import flashinfer` raises


def parse_flashinfer_arch_list(
    value: str, rng: kb.FlashinferRange, cuda: str | None
) -> ArchListParse:
    """FLASHINFER_CUDA_ARCH_LIST as FlashInfer's own parser reads it (split(" "), split("."))."""
    archs: list[tuple[int, str]] = []
    for token in value.split(" "):
        parts = token.split(".")
        if len(parts) != 2:
            what = (
                "too many values to unpack (expected 2)"
                if len(parts) > 2
                else (f"not enough values to unpack (expected 2, got {len(parts)})")
            )
            return ArchListParse(tuple(archs), f"ValueError: {what}")
        major_text, minor = parts
        if not major_text.strip().lstrip("+-").isdigit():
            return ArchListParse(
                tuple(archs), f"ValueError: invalid literal for int() with base 10: {major_text!r}"
            )
        major = int(major_text)
        if not minor:
            return ArchListParse(tuple(archs), "IndexError: string index out of range")
        if minor[-1].isalpha() or rng.arch_list_verbatim:
            archs.append((major, minor))  # 0.5.0-0.6.6 take every entry as written
            continue
        if not minor.strip().lstrip("+-").isdigit():
            return ArchListParse(
                tuple(archs), f"ValueError: invalid literal for int() with base 10: {minor!r}"
            )
        norm = normalise_arch(rng, major, int(minor), cuda)
        if norm.raises:
            return ArchListParse(tuple(archs), f"RuntimeError: {norm.raises}")
        archs.append((major, norm.minor_text or minor))
    return ArchListParse(tuple(archs), None)


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
) -> tuple[Fix, ...]:
    """The fix engine's answer for this exact GPU with the toolkits found on the machine."""
    case = FlashinferCase(
        version,
        target.compute_capability,
        current_cuda,
        current_home,
        tuple(_ok_nvcc_toolkits(facts)),
        facts.torch.cuda if facts.torch else None,
    )
    return flashinfer_fixes(case)


def flashinfer_findings(facts: ToolchainFacts, targets: Sequence[GpuTarget]) -> list[JitFinding]:
    pkg = next((p for p in facts.packages if p.name == "flashinfer-python"), None)
    if pkg is None:
        return []
    rules = kb.jit_rules()["flashinfer"]
    rng = kb.flashinfer_range(pkg.version)
    when = "at the first FlashInfer JIT call (sampling, attention plan, norm, MoE ...)"
    findings: list[JitFinding] = []
    base_chain = [Fact(f"flashinfer-python {pkg.version} installed", f"{pkg.dist_info}/METADATA")]
    if rng is None:
        for target in targets:
            findings.append(
                JitFinding(
                    "flashinfer-python",
                    pkg.version,
                    target.label,
                    str(target.compute_capability),
                    "unknown",
                    None,
                    f"flashinfer-python {pkg.version} picks architectures through torch; "
                    "archgap models 0.3.1 and later.",
                    tuple(base_chain),
                    (),
                    when,
                )
            )
        return findings
    resolved = resolve_nvcc(facts, rules["nvcc_lookup"])
    chain = [*base_chain, *resolved.chain]
    tk = resolved.toolkit
    cuda: str | None = None
    if tk is not None:
        chain.append(_toolkit_fact(tk))
        if tk.status == "ok":
            cuda = tk.version
    lookup_src = rules["nvcc_lookup_source"]
    chain.append(Fact("FlashInfer asks that nvcc for the CUDA version (not torch)", lookup_src))
    torch = facts.torch
    if tk is not None and tk.status in ("missing", "broken") and torch and torch.cuda:
        # get_cuda_version falls back to torch.version.cuda when nvcc cannot run.
        cuda = torch.cuda
        chain.append(
            Fact(f"nvcc unusable, FlashInfer falls back to torch.version.cuda = {cuda}", torch.file)
        )
    src_facts, missing = _source_facts(facts, rng.source_checks)
    chain.extend(src_facts)
    arch_list = _env(facts, rules["arch_env"])
    for target in targets:
        findings.append(
            _flashinfer_one(
                facts, pkg.version, rng, target, tk, cuda, arch_list, chain, missing, when
            )
        )
    return findings


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
) -> JitFinding:
    cc = target.compute_capability
    chain = list(base_chain)
    chain.append(Fact(f"GPU {target.label}: compute capability {cc}", target.source))

    def finding(
        status: str, error: str | None, cause: str, fixes: tuple[Fix, ...] = ()
    ) -> JitFinding:
        if status == "fails" and missing_source:
            status = "unknown"
            cause += (
                " (Not confirmed: the installed source lacks "
                + ", ".join(missing_source)
                + " — a fork or patched build may behave differently.)"
            )
        return JitFinding(
            "flashinfer-python",
            version,
            target.label,
            str(cc),
            status,
            error,
            cause,
            tuple(chain),
            fixes,
            when,
            target.gates_exit_code,
        )

    home = tk.home if tk else None
    if not flashinfer_supports(cc):
        rules = kb.jit_rules()["flashinfer"]
        chain.append(
            Fact(
                "check_cuda_arch() requires sm75 or higher", rules["min_compute_capability_source"]
            )
        )
        return finding(
            "fails",
            f"RuntimeError: {rng.check_message}",
            f"FlashInfer {version} does not support sm_{cc.sm} (compute capability {cc}): "
            "check_cuda_arch() rejects it whatever the toolkit; avoid its paths.",
            _flashinfer_fixes(facts, version, target, cuda, home),
        )
    if tk is not None and tk.status == "timeout":
        return finding(
            "fails",
            None,
            f"`{tk.tool_path} --version` never returns and FlashInfer runs it without a timeout,"
            " so the process hangs when FlashInfer first asks for the CUDA version.",
            _flashinfer_fixes(facts, version, target, None, home),
        )
    if arch_list is not None:
        whose = facts.env_source
        chain.append(Fact(f"FLASHINFER_CUDA_ARCH_LIST={arch_list!r}", f"env ({whose})"))
        parsed = parse_flashinfer_arch_list(arch_list, rng, cuda)
        if parsed.error:
            return finding(
                "fails",
                parsed.error,
                f"FLASHINFER_CUDA_ARCH_LIST={arch_list!r} does not parse with FlashInfer "
                f"{version}'s parser (space-separated MAJOR.MINOR[a|f]); it raises at import.",
                _flashinfer_fixes(facts, version, target, cuda, home),
            )
        archs = parsed.archs
        if not any(_runs_on(m, t, target) for m, t in archs):
            return finding(
                "fails",
                "CUDA error: no kernel image is available for execution on the device",
                f"FLASHINFER_CUDA_ARCH_LIST={arch_list!r} builds no target that runs on "
                f"compute capability {cc}.",
                _flashinfer_fixes(facts, version, target, cuda, home),
            )
    else:
        norm = normalise_arch(rng, cc.major, cc.minor, cuda)
        if norm.raises:
            chain.append(
                Fact(
                    f"_normalize_cuda_arch({cc.major}, {cc.minor}) raises "
                    f"RuntimeError({norm.raises!r}) with CUDA {cuda or 'unknown'}; the broad "
                    "`except Exception` logs it as a warning and TARGET_CUDA_ARCHS stays empty",
                    rng.source,
                )
            )
            warning = rng.warning.format(error=norm.raises, device_count="N")
            return finding(
                "fails",
                f"RuntimeError: {rng.check_message}",
                f"nvcc {cuda or '(none found)'} is too old for FlashInfer {version}'s SM "
                f"{cc.major}.x rule ({norm.raises}); the error is swallowed at import "
                f"(logged: {warning!r}) and check_cuda_arch() then rejects the GPU.",
                _flashinfer_fixes(facts, version, target, cuda, home),
            )
        archs = ((cc.major, norm.minor_text or str(cc.minor)),)
        chain.append(
            Fact(
                f"FlashInfer {version} normalises {cc} to {_target(*archs[0])}"
                + (f" with CUDA {cuda}" if cc.major == 12 else ""),
                rng.source,
            )
        )
    # The JIT build: every target goes to nvcc as -gencode=arch=compute_X,code=sm_X.
    if tk is None or tk.status != "ok" or tk.version is None:
        reason = "no nvcc found" if tk is None else f"{tk.tool_path}: {tk.status}"
        return finding(
            "fails",
            None,
            f"FlashInfer must compile {', '.join(_target(*a) for a in archs)} but {reason}.",
            _flashinfer_fixes(facts, version, target, None, home),
        )
    built = []
    for major, minor_text in archs:
        tgt = build_target(rng, major, minor_text, tk.version)
        if tgt != _target(major, minor_text):
            chain.append(
                Fact(
                    f"nvcc {tk.version} cannot build {_target(major, minor_text)}: FlashInfer "
                    f"{version} builds {tgt} instead",
                    rng.source,
                )
            )
        built.append(tgt)
        if not kb.toolkit_can_target(tk.version, tgt):
            first = kb.first_toolkit_for(tgt)
            chain.append(
                Fact(
                    f"nvcc {tk.version} cannot compile {tgt}"
                    + (f" (first toolkit: CUDA {first})" if first else ""),
                    "kb/toolkits.json",
                )
            )
            return finding(
                "fails",
                kb.jit_rules()["flashinfer"]["nvcc_unsupported_arch"].format(target=tgt[8:]),
                f"The arch set is fine but the JIT build fails: nvcc {tk.version} cannot "
                f"compile {tgt}" + (f" (needs CUDA >= {first})." if first else "."),
                _flashinfer_fixes(facts, version, target, tk.version, home),
            )
    return finding(
        "ok",
        None,
        f"flashinfer-python {version} on {target.label}: builds {', '.join(built)} with nvcc "
        f"{tk.version} ({tk.tool_path}), which runs on {cc}.",
    )


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
    rules = kb.jit_rules()["torch_ext"]
    gates = any(t.gates_exit_code for t in targets)
    version = torch.version or "?"
    findings: list[JitFinding] = []
    base = [Fact(f"torch {version} built with CUDA {torch.cuda}", torch.file)]
    when_ext = (
        "when a torch C++/CUDA extension is built (torch.utils.cpp_extension, pip source builds)"
    )
    resolved = resolve_nvcc(facts, rules["cuda_home_lookup"])
    tk = resolved.toolkit
    if tk is not None and tk.status == "ok" and tk.version:
        have, want = kb.major_minor(tk.version), kb.major_minor(torch.cuda)
        if have and want and have[0] != want[0]:
            fixes = [
                Fix(
                    f"point CUDA_HOME at {t.home} (nvcc {t.version} found there: {t.origin})",
                    "Extension builds then use a toolkit of torch's CUDA major.",
                    env=(("CUDA_HOME", t.home),),
                )
                for t in _ok_nvcc_toolkits(facts)
                if (kb.major_minor(t.version or "") or (0, 0))[0] == want[0] and t.home != tk.home
            ]
            findings.append(
                JitFinding(
                    "torch (C++ extensions)",
                    version,
                    None,
                    None,
                    "fails",
                    "RuntimeError: "
                    + rules["mismatch_message"].format(nvcc=tk.version, torch=torch.cuda),
                    f"nvcc {tk.version} (found through {tk.found_by}) and torch's CUDA "
                    f"{torch.cuda} differ in major version; torch refuses to build extensions.",
                    (
                        *base,
                        *resolved.chain,
                        _toolkit_fact(tk),
                        Fact("major mismatch raises", rules["mismatch_source"]),
                    ),
                    tuple(fixes),
                    when_ext,
                    gates,
                )
            )
    arch_list = _env(facts, rules["arch_env"])
    if arch_list:
        nvcc = tk.version if tk is not None and tk.status == "ok" else None
        findings.extend(_arch_list_findings(facts, torch, arch_list, targets, nvcc, base))
    if driver_version:
        ok, rule = kb.driver_runs_runtime(driver_version, torch.cuda)
        if ok is False:
            findings.append(
                JitFinding(
                    "torch",
                    version,
                    None,
                    None,
                    "fails",
                    kb.jit_rules()["torch"]["driver_error"],
                    f"torch's CUDA {torch.cuda} runtime needs a newer driver than "
                    f"{driver_version}.",
                    (
                        *base,
                        Fact(f"driver {driver_version}", driver_source),
                        Fact(rule, "kb/drivers.json"),
                    ),
                    (
                        Fix(
                            "upgrade the NVIDIA driver, or install a torch build for an older CUDA "
                            "(a different +cuXYZ wheel)",
                            "A driver upgrade needs a reboot/maintenance window.",
                        ),
                    ),
                    "at CUDA initialisation (the first torch.cuda call)",
                    gates,
                )
            )
    return findings


def _arch_list_findings(
    facts: ToolchainFacts,
    torch: TorchBuild,
    arch_list: str,
    targets: Sequence[GpuTarget],
    nvcc: str | None,
    base: Sequence[Fact],
) -> list[JitFinding]:
    """TORCH_CUDA_ARCH_LIST against torch's parser, the nvcc found and each GPU."""
    rules = kb.jit_rules()["torch_ext"]
    version = torch.version or "?"
    gates = any(t.gates_exit_code for t in targets)
    when = "when a torch C++/CUDA extension is built (torch.utils.cpp_extension, pip source builds)"
    parsed = torch_ext.parse_arch_list(arch_list, torch)
    chain = (
        *base,
        Fact(f"TORCH_CUDA_ARCH_LIST={arch_list!r}", f"env ({facts.env_source})"),
        Fact(f"accepted names: {' '.join(parsed.valid)}", parsed.valid_source),
    )

    def finding(status: str, error: str, cause: str, fixes: Sequence[Fix], gpu: GpuTarget | None,
                gate: bool) -> JitFinding:  # fmt: skip
        return JitFinding(
            "torch (C++ extensions)", version, gpu.label if gpu else None,
            str(gpu.compute_capability) if gpu else None, status, error, cause, chain,
            tuple(fixes), when, gate,
        )  # fmt: skip

    if parsed.unknown:
        token = parsed.unknown[0]
        fix = Fix(
            "use names from torch's list, e.g. "
            + " ".join(sorted({f"{t.compute_capability}" for t in targets})),
            "Family 'f' names are not accepted by torch's parser.",
            kind="env",
        )
        status = "fails" if parsed.definitive else "unknown"
        arch = token.removesuffix("+PTX")
        return [
            finding(
                status,
                "ValueError: " + rules["unknown_arch_message"].format(arch=arch),
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
                kb.jit_rules()["flashinfer"]["nvcc_unsupported_arch"].format(
                    target=bad[0].target[8:]
                ),
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
    facts: ToolchainFacts,
    targets: Sequence[GpuTarget],
    driver_version: str | None,
    driver_source: str = "nvidia-smi",
) -> list[JitFinding]:
    """Each CUDA runtime wheel (cudart, nvrtc) the driver cannot run (minor-version rules)."""
    if not driver_version:
        return []
    gates = any(t.gates_exit_code for t in targets)
    findings = []
    seen: set[tuple[str, str]] = set()
    for tk in facts.toolkits:
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
            JitFinding(
                name,
                tk.full_version or tk.version,
                None,
                None,
                "fails",
                kb.jit_rules()["torch"]["driver_error"],
                f"the CUDA {tk.version} {tk.component} in this environment needs a newer driver "
                f"than {driver_version} ({rule}).",
                (
                    Fact(f"{name} {tk.full_version or tk.version}", tk.version_from),
                    Fact(f"driver {driver_version}", driver_source),
                    Fact(rule, "kb/drivers.json"),
                ),
                (
                    Fix(
                        f"upgrade the NVIDIA driver to one that runs CUDA {tk.version}, or install "
                        "the CUDA forward-compatibility package (cuda-compat) on a datacenter GPU",
                        "A driver upgrade needs a maintenance window; forward compatibility "
                        "works only on datacenter GPUs (https://docs.nvidia.com/deploy/cuda-compatibility/).",
                        kind="upgrade",
                    ),
                    Fix(
                        "install builds for the CUDA the driver supports (a torch wheel from an "
                        "older +cuXYZ index and its nvidia-* wheels)",
                        "Keeps the driver; the whole stack must move to that CUDA.",
                        kind="upgrade",
                    ),
                ),
                "at CUDA initialisation (the first CUDA call of any package using it)",
                gates,
            )
        )
    return findings


def jit_findings(
    facts: ToolchainFacts,
    targets: Sequence[GpuTarget],
    driver_version: str | None = None,
    driver_source: str = "nvidia-smi",
) -> tuple[JitFinding, ...]:
    """Every JIT finding (ok, fails, unknown) for these GPUs."""
    from archgap.analysis import triton  # it builds on this module's facts and findings

    return (
        *flashinfer_findings(facts, targets),
        *triton.triton_findings(facts, targets, driver_version, driver_source),
        *torch_findings(facts, targets, driver_version, driver_source),
        *runtime_findings(facts, targets, driver_version, driver_source),
    )
