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
from archgap.image.facts import ImageFacts
from archgap.image.source import ELF_MACHINE
from archgap.probe.facts import BinaryFacts, Problem

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


def _oci_platform(cpu: str) -> str:
    """'aarch64' -> 'linux/arm64': how images name the platform of that CPU."""
    names = {elf: oci for oci, elf in ELF_MACHINE.items()}
    return f"linux/{names.get(cpu, cpu)}"


def declared_cpu(images: Sequence[ImageFacts]) -> tuple[str, str] | None:
    """(ELF machine, what says so) of the container images judged, when their configs declare
    one CPU: what a container runtime runs them as, whatever the native files are."""
    declared = {(i.elf_machine, i.platform) for i in images if i.elf_machine}
    if len(declared) != 1:
        return None
    [(cpu, platform)] = declared
    return cpu, f"the image's config says {platform}"


def image_mismatches(
    images: Sequence[ImageFacts], binaries: Sequence[BinaryFacts]
) -> tuple[Problem, ...]:
    """Images whose config declares one CPU while their native files are built for another:
    those files cannot be loaded in that image on any host."""
    problems = []
    for image in images:
        if not image.elf_machine:
            continue
        mine = [b for b in binaries if b.path.startswith(image.label + "/")]
        other = Counter(b.machine for b in mine if b.machine and b.machine != image.elf_machine)
        if other:
            cpu, files = other.most_common(1)[0]
            problems.append(
                Problem(
                    image.label,
                    f"the config says {image.platform} ({image.elf_machine}) but {files} native "
                    f"files are {cpu}: they cannot be loaded in this image on any host",
                )
            )
    return tuple(problems)


def platform_findings(
    binaries: Sequence[BinaryFacts],
    targets: Sequence[GpuTarget],
    platform: str | None,
    declared: tuple[str, str] | None = None,
) -> tuple[PlatformFinding, ...]:
    """One finding per GPU whose host CPU differs from the environment's: the CPU a container
    image ``declared`` (ELF machine, what says so), else the ELF machine of its native files."""
    env = environment_cpu(binaries)
    if declared is not None:
        cpu, what = declared[0], f"this image is {declared[0]} ({declared[1]})"
        fix = "judge and deploy its {platform} image there (a multi-platform image: --platform)"
    elif env is not None:
        cpu, what = env[0], f"this environment's native files are {env[0]} ({env[1]} ELF files)"
        fix = "install the {host} builds of these packages there"
    else:
        return ()
    here = cpu_of_uname(platform)
    findings = []
    for target in targets:
        host, source = target.host_cpu, target.host_cpu_source
        if host is None and target.role == "present" and here:
            host, source = here, f"the probed machine ({platform})"
        if host is None or host == cpu:
            continue
        cause = (
            f"{what}, and {target.label} systems are {host} ({source}): it cannot run there at "
            f"all, whatever SASS it has; {fix.format(host=host, platform=_oci_platform(host))}"
        )
        findings.append(
            PlatformFinding(target.label, cpu, host, source, cause, target.gates_exit_code)
        )
    return tuple(findings)
