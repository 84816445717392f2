"""What Triton will do on first use: its minimum compute capability, whether the ptxas it picks
knows the GPU, and whether the driver loads what that ptxas writes (kb/jit.json ``triton``)."""

from __future__ import annotations

from collections.abc import Sequence

from archgap.analysis.fixes.engine import Fix, worded
from archgap.analysis.jit.findings import (
    Fact,
    JitFinding,
    JitStatus,
    _env,
    _ok_ptxas,
    _source_facts,
    _toolkit_fact,
    gpu_finding,
)
from archgap.analysis.verdicts.compat import GpuTarget
from archgap.kb import toolchain as kb
from archgap.probe.facts import InstalledPackage, ToolchainFacts, Toolkit


def triton_findings(
    facts: ToolchainFacts,
    targets: Sequence[GpuTarget],
    driver_version: str | None = None,
    driver_source: str = "nvidia-smi",
) -> list[JitFinding]:
    """Per GPU: Triton's minimum CC, whether its ptxas knows the GPU and the driver loads it."""
    pkg = next((p for p in facts.packages if p.name == "triton"), None)
    if pkg is None:
        return []
    findings = []
    for target in targets:
        findings.extend(_triton_one(facts, pkg, target, driver_version, driver_source))
    return findings


def _triton_one(
    facts: ToolchainFacts,
    pkg: InstalledPackage,
    target: GpuTarget,
    driver_version: str | None,
    driver_source: str,
) -> list[JitFinding]:
    rules = kb.jit_rules().triton
    bundled = {t.tool: t for t in facts.toolkits if t.found_by == "triton"}
    cc = target.compute_capability
    suffix_from = kb.major_minor(rules.suffix_a_from_cc) or (9, 0)
    arch = f"sm_{cc.sm}{'a' if (cc.major, cc.minor) >= suffix_from else ''}"
    binary, env_name = _ptxas_names(facts, cc.major, bundled)
    chain = [
        Fact(f"triton {pkg.version} installed", f"{pkg.dist_info}/METADATA"),
        Fact(f"GPU {target.label}: compute capability {cc}", target.source),
        Fact(f"triton assembles for {arch}", rules.arch_name_source),
        *_source_facts(facts, rules.source_checks)[0],  # the installed copy's own lines
    ]
    out: list[JitFinding] = []

    def add(status: JitStatus, error: str | None, cause: str, fixes: Sequence[Fix] = ()) -> None:
        when = "when the first triton kernel (torch.compile, vLLM/SGLang triton ops) compiles"
        out.append(
            gpu_finding("triton", pkg.version, target, status, error, cause, chain, fixes, when)
        )

    too_old = _triton_minimum(target, rules.minimum)
    if too_old is not None:
        add(*too_old)
        if too_old[0] == "fails":
            return out
    override = _env(facts, env_name)
    if override:
        tk = next((t for t in facts.toolkits if t.found_by == env_name), None)
        chain.append(Fact(f"{env_name}={override}", f"env {env_name} ({facts.env_source})"))
    else:
        tk = bundled.get(binary)
    if tk is None:
        return out  # no bundled ptxas in this build: nothing to judge
    chain.append(_toolkit_fact(tk))
    chain.append(
        Fact(f"ptxas selection: {env_name} or the bundled binary", rules.ptxas_selection_source)
    )
    failed = _ptxas_fails(facts, tk, arch, env_name, (driver_version, driver_source), chain)
    if failed is not None:
        add(*failed)
    elif too_old is None:
        loads = f" and driver {driver_version} loads it" if driver_version else ""
        add(
            "ok",
            None,
            f"triton {pkg.version} on {target.label}: ptxas {tk.version} assembles {arch}{loads}.",
        )
    return out


def _ptxas_names(facts: ToolchainFacts, major: int, bundled: dict[str, Toolkit]) -> tuple[str, str]:
    """(the bundled binary, the variable that overrides it) triton uses for a GPU of ``major``:
    its Blackwell ptxas from that major on, where the build bundles one or the variable is set."""
    rules = kb.jit_rules().triton
    use_blackwell = major >= rules.blackwell_from_major and bool(
        rules.blackwell_binary in bundled or _env(facts, rules.env_blackwell)
    )
    if use_blackwell:
        return rules.blackwell_binary, rules.env_blackwell
    return "ptxas", rules.env


def _ptxas_fails(
    facts: ToolchainFacts,
    tk: Toolkit,
    arch: str,
    env_name: str,
    driver: tuple[str | None, str],
    chain: list[Fact],
) -> tuple[JitStatus, str | None, str, Sequence[Fix]] | None:
    """Why the ptxas triton picked cannot serve ``arch``: it does not run, does not know the
    target, or writes cubins newer than the driver (version, source) loads; None when it can."""
    rules = kb.jit_rules().triton
    if tk.status != "ok" or tk.version is None:
        fixes = _ptxas_fixes(facts, tk, arch, env_name, None)
        return "unknown", None, f"{tk.tool_path} does not run ({tk.reason}).", fixes
    if not kb.toolkit_can_target(tk.version, arch):
        cause = f"triton's ptxas {tk.version} ({tk.tool_path}) does not know {arch}."
        fixes = _ptxas_fixes(facts, tk, arch, env_name, None)
        return "fails", rules.error.format(target=arch), cause, fixes
    driver_version, driver_source = driver
    if not driver_version:
        return None
    runs, rule = kb.driver_runs_runtime(driver_version, tk.version)
    if runs is not False:
        return None
    chain += [Fact(f"driver {driver_version}", driver_source), Fact(rule, "kb/drivers.json")]
    cause = (
        f"triton's ptxas {tk.version} ({tk.tool_path}) is newer than driver "
        f"{driver_version} supports: the driver refuses the cubins it writes."
    )
    fixes = _ptxas_fixes(facts, tk, arch, env_name, driver_version)
    return "fails", rules.ptxas_newer_than_driver_error, cause, fixes


def _triton_minimum(
    target: GpuTarget, rule: kb.TritonMinimum
) -> tuple[JitStatus, str | None, str] | None:
    """Below Triton's supported minimum (CC 8.0): refused below 7.0, FMA fallback above."""
    cc = target.compute_capability
    supported = kb.major_minor(rule.supported) or (8, 0)
    refused = kb.major_minor(rule.refused_below) or (7, 0)
    if (cc.major, cc.minor) < refused:
        error = rule.refused_error.format(gpu=target.label, cc=str(cc))
        return (
            "fails",
            error,
            f"Triton does not support compute capability {cc} ({rule.source}).",
        )
    if (cc.major, cc.minor) < supported:
        return (
            "unknown",
            None,
            (
                f"{cc} is below Triton's supported minimum {rule.supported}: "
                f"{rule.below_supported} ({rule.source})."
            ),
        )
    return None


def _ptxas_fixes(
    facts: ToolchainFacts, tk: Toolkit, arch: str, env_name: str, driver: str | None
) -> list[Fix]:
    """Other assemblers on the machine that know ``arch`` (and that ``driver`` can run)."""
    fixes = []
    for path, version in _ok_ptxas(facts):
        if path == tk.tool_path or not kb.toolkit_can_target(version, arch):
            continue
        if driver and kb.driver_runs_runtime(driver, version)[0] is False:
            continue
        env = ((env_name, path),)
        fixes.append(
            worded("triton-ptxas-env-driver", kind="env", env=env, env_name=env_name, path=path,
                   version=version, driver=driver)
            if driver
            else worded("triton-ptxas-env", kind="env", env=env, env_name=env_name, path=path,
                        version=version)
        )  # fmt: skip
    fixes.append(
        worded("triton-upgrade", kind="upgrade", arch=arch)
        if driver is None
        else worded("triton-driver-upgrade", kind="upgrade", env_name=env_name, driver=driver)
    )
    return fixes
