"""The host platform: an environment built for one CPU cannot run on a machine of another.

GB10 (DGX Spark), Jetson Thor/Orin/Xavier and Grace systems (GH200, GB200, GB300) are aarch64
(kb/gpus.json ``host_cpu``): an x86-64 environment named against them cannot run there at all,
whatever SASS it carries. The environment's CPU is the ELF machine of its native files; the
target's is the product's (a named GPU) or the probed machine's (a present GPU).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from archgap.analysis.compat import GpuTarget
from archgap.model import BinaryFacts

# uname -m spellings -> the ELF names the probe reports
_UNAME = {"x86_64": "x86-64", "amd64": "x86-64", "aarch64": "aarch64", "arm64": "aarch64"}


@dataclass(frozen=True)
class PlatformFinding:
    gpu: str  # the GPU target's label
    environment_cpu: str  # "x86-64": the ELF machine of the environment's native files
    host_cpu: str  # "aarch64"
    source: str  # where the host CPU comes from
    cause: str
    gates_exit_code: bool


def cpu_of_uname(platform: str | None) -> str | None:
    """'Linux 6.8.0 x86_64' (the probe's ``platform``) -> 'x86-64'."""
    machine = (platform or "").split()[-1:] or [""]
    return _UNAME.get(machine[0].lower())


def environment_cpu(binaries: Iterable[BinaryFacts]) -> tuple[str, int] | None:
    """The most common ELF machine of the native files, and how many files have it."""
    counts = Counter(b.machine for b in binaries if b.machine)
    return counts.most_common(1)[0] if counts else None


def platform_findings(
    binaries: Sequence[BinaryFacts], targets: Sequence[GpuTarget], platform: str | None
) -> tuple[PlatformFinding, ...]:
    """One finding per GPU whose host CPU differs from the environment's."""
    env = environment_cpu(binaries)
    if env is None:
        return ()
    cpu, files = env
    here = cpu_of_uname(platform)
    findings = []
    for target in targets:
        host, source = target.host_cpu, target.host_cpu_source
        if host is None and target.role == "present" and here:
            host, source = here, f"the probed machine ({platform})"
        if host is None or host == cpu:
            continue
        cause = (
            f"this environment's native files are {cpu} ({files} ELF files), and {target.label} "
            f"systems are {host} ({source}): it cannot run there at all, whatever SASS it has; "
            f"install the {host} builds of these packages there"
        )
        findings.append(
            PlatformFinding(target.label, cpu, host, source, cause, target.gates_exit_code)
        )
    return tuple(findings)
