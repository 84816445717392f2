"""The host platform: an environment built for one CPU cannot run on a machine of another.

GB10 (DGX Spark), Jetson Thor/Orin/Xavier and Grace systems (GH200, GB200, GB300) are aarch64
(kb/gpus.json ``host_cpu``): an x86-64 environment named against them cannot run there at all,
whatever SASS it carries. The environment's CPU is the ELF machine of its native files; the
target's is the product's (a named GPU) or the probed machine's (a present GPU).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from archgap.analysis.verdicts.compat import GpuTarget
from archgap.image.facts import ImageFacts
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
    image: str = ""  # the image it is about ("" for an environment's or wheels' native files)


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
    from archgap.image.source import ELF_MACHINE  # image reading, only for a platform finding

    names = {elf: oci for oci, elf in ELF_MACHINE.items()}
    return f"linux/{names.get(cpu, cpu)}"


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


@dataclass(frozen=True)
class _Subject:
    """What one finding is about: an image (its label) or the environment (""), its CPU."""

    image: str
    cpu: str
    what: str  # "this image is x86-64 (the image's config says linux/amd64)"
    fix: str  # formatted with the host CPU and its OCI platform
    files: tuple[BinaryFacts, ...] = ()  # what it holds, which a host of another CPU cannot load


_IMAGE_FIX = "judge and deploy its {platform} image there (a multi-platform image: --platform)"
_FILES_FIX = "install the {host} builds of these packages there"


def _subjects(binaries: Sequence[BinaryFacts], images: Sequence[ImageFacts]) -> list[_Subject]:
    """Each image judged (the CPU its config declares: what a container runtime runs it as,
    whatever its native files are; for a root file system, its native files'), then the native
    files of no image (wheels, an installed environment) by their ELF machine."""
    several = len(images) > 1
    subjects: list[_Subject] = []
    rest = list(binaries)
    for image in images:
        prefix = image.label + "/"
        mine = [b for b in rest if b.path.startswith(prefix)]
        rest = [b for b in rest if not b.path.startswith(prefix)]
        subjects += _image_subject(image, mine, several)
    env = environment_cpu(rest)
    if env is not None:
        what = f"this environment's native files are {env[0]} ({env[1]} ELF files)"
        subjects.append(_Subject("", env[0], what, _FILES_FIX, tuple(rest)))
    return subjects


def _image_subject(image: ImageFacts, mine: Sequence[BinaryFacts], several: bool) -> list[_Subject]:
    """One image's CPU; named by its label when several images are judged together."""
    if image.elf_machine:
        cpu = image.elf_machine
        what = f"this image is {cpu} (the image's config says {image.platform})"
        if several:
            what = f"the image {image.label} is {cpu} (its config says {image.platform})"
        return [_Subject(image.label, cpu, what, _IMAGE_FIX, tuple(mine))]
    env = environment_cpu(mine)
    if env is None:
        return []
    whose = f"the native files of {image.label}" if several else "this environment's native files"
    what = f"{whose} are {env[0]} ({env[1]} ELF files)"
    return [_Subject(image.label, env[0], what, _FILES_FIX, tuple(mine))]


def _mismatches(
    binaries: Sequence[BinaryFacts],
    targets: Sequence[GpuTarget],
    platform: str | None,
    images: Sequence[ImageFacts],
) -> Iterator[tuple[_Subject, GpuTarget, str, str]]:
    """(what is judged, the GPU, its host CPU, where that comes from) for each GPU whose host
    CPU differs from the CPU of what is judged."""
    for subject in _subjects(binaries, images):
        for target in targets:
            host, source = _host(target, platform)
            if host is not None and host != subject.cpu:
                yield subject, target, host, source


def _host(target: GpuTarget, platform: str | None) -> tuple[str | None, str]:
    """The CPU of the GPU's systems and where that comes from: the named product's (kb), else
    for a present GPU the probed machine's."""
    here = cpu_of_uname(platform)
    if target.host_cpu is None and target.role == "present" and here:
        return here, f"the probed machine ({platform})"
    return target.host_cpu, target.host_cpu_source


def platform_findings(
    binaries: Sequence[BinaryFacts],
    targets: Sequence[GpuTarget],
    platform: str | None,
    images: Sequence[ImageFacts] = (),
) -> tuple[PlatformFinding, ...]:
    """One finding per GPU whose host CPU differs from the CPU of what is judged: of each
    container image (its config's, each image its own when several of different CPUs are
    judged together), and of the native files of no image (their ELF machine)."""
    findings = []
    for subject, target, host, source in _mismatches(binaries, targets, platform, images):
        fix = subject.fix.format(host=host, platform=_oci_platform(host))
        cause = (
            f"{subject.what}, and {target.label} systems are {host} ({source}): it cannot "
            f"run there at all, whatever SASS it has; {fix}"
        )
        gates = target.gates_exit_code
        args = (target.label, subject.cpu, host, source, cause, gates, subject.image)
        findings.append(PlatformFinding(*args))
    return tuple(findings) + wheel_findings(binaries, targets)


# The image format each system's loader loads (uname's system name, lower case)
_LOADER_FORMAT = {"linux": ("elf", "Linux", "ld.so"), "windows": ("pe", "Windows", "LoadLibrary")}
_FORMAT_NAME = {"elf": "an ELF shared object", "pe": "a Windows DLL"}


def other_system_files(binaries: Iterable[BinaryFacts], platform: str | None) -> dict[str, str]:
    """Library path -> why the host's loader never loads it: a file of the other system's
    format (a Windows DLL in a Linux environment). Some wheels ship every system's build side by
    side (ctransformers 0.2.27, py3-none-any: lib/cuda/ctransformers.dll beside
    lib/cuda/libctransformers.so); only the host's own counts toward its package. Nothing where
    the host's system is not known (wheels and images judged without one)."""
    system = (platform or "").split()[:1]
    known = _LOADER_FORMAT.get(system[0].lower()) if system else None
    if known is None:
        return {}
    loads, name, loader = known
    return {
        b.path: f"{_FORMAT_NAME[b.format]}: {name}'s loader ({loader}) never loads it"
        for b in binaries
        if b.format in _FORMAT_NAME and b.format != loads
    }


def platform_blocked(
    binaries: Sequence[BinaryFacts],
    targets: Sequence[GpuTarget],
    platform: str | None,
    images: Sequence[ImageFacts] = (),
) -> dict[tuple[str, str], str]:
    """(library path, GPU label) -> why it cannot load there: a file built for one CPU does not
    load on a host of another, so its package is not native on that GPU whatever its SASS."""
    blocked = {}
    for subject, target, host, _ in _mismatches(binaries, targets, platform, images):
        why = f"it is {subject.cpu} and {target.label} systems are {host}"
        # a file of the host's own CPU among them (a stray) is left to its own verdict
        mine = (b.path for b in subject.files if b.machine != host)
        blocked.update({(path, target.label): why for path in mine})
    return blocked


def jit_blocked(
    binaries: Sequence[BinaryFacts],
    targets: Sequence[GpuTarget],
    platform: str | None,
    images: Sequence[ImageFacts] = (),
) -> dict[str, str]:
    """GPU label -> why no JIT compiler of what is judged can run on that GPU's systems: a JIT
    build runs in the environment, with its interpreter and the toolkit it finds, so an
    environment of one CPU says nothing of what a JIT does on a host of another. What is judged
    is each image and the native files of no image, as for the packages; an environment with
    no native files (pure Python: FlashInfer) runs on the CPU of the machine its interpreter ran
    the probe on. A GPU is blocked only when nothing judged is of its host's CPU."""
    subjects = _subjects(binaries, images)
    here = cpu_of_uname(platform)
    if not subjects and here:
        what = f"this environment runs on {here} (its interpreter, on the probed {platform})"
        subjects = [_Subject("", here, what, _FILES_FIX)]
    blocked = {}
    for target in targets:
        host, source = _host(target, platform)
        if host is None or not subjects or any(s.cpu == host for s in subjects):
            continue
        what = "; ".join(s.what for s in subjects)
        blocked[target.label] = (
            f"{what}, and {target.label} systems are {host} ({source}): neither it nor the "
            f"toolkit its JIT compilers use can run there, so what they would do is not judged; "
            f"judge the {host} environment that will run there"
        )
    return blocked


ANY_GPU = "any GPU"  # the GPU of a finding that holds whatever the GPU


def wheel_findings(
    binaries: Sequence[BinaryFacts], targets: Sequence[GpuTarget]
) -> tuple[PlatformFinding, ...]:
    """A wheel whose native files are for a CPU its file name does not name: pip installs it
    by its name, where they cannot load, so it runs on no GPU (one finding, gating when any
    target gates)."""
    if not any(".whl/" in b.path for b in binaries):
        return ()
    from archgap.index.wheeltags import strays  # the wheel rules, only for wheels

    gates = any(t.gates_exit_code for t in targets)
    findings = []
    for stray in strays(binaries):
        cause = f"{stray.reason}; build it for {stray.named}, or name it for {stray.cpu}"
        where = f"the file name of {stray.wheel}"
        findings.append(PlatformFinding(ANY_GPU, stray.cpu, stray.named, where, cause, gates))
    return tuple(findings)
