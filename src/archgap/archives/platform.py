"""A platform as OCI names it (os/architecture[/variant]): what ``--platform`` picks, for wheels
(a wheel platform tag: ``manylinux_2_28_aarch64``) and images (``linux/arm64``) alike, and the
ELF machine of its architecture (what the host-platform finding compares)."""

from __future__ import annotations

import platform as host
import re
from collections.abc import Sequence
from dataclasses import dataclass

from archgap.errors import UsageError

# uname -m and Go's GOARCH spellings -> the OCI architecture names; OCI -> the ELF names the
# kernel reader reports (what analysis.verdicts.platform compares).
_OCI_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
_OCI_ARCH.update({"ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64", "arm": "arm"})
ELF_MACHINE = {"amd64": "x86-64", "arm64": "aarch64", "ppc64le": "ppc64", "riscv64": "riscv"}
ELF_MACHINE.update({"arm": "arm", "386": "x86"})
_WHEEL_TAG_ARCH = re.compile(r"_(x86_64|aarch64|ppc64le|s390x)$")
# A Windows wheel's platform tag (PEP 425: the wheel file name's last tag, "." separating more)
_WINDOWS_TAG = re.compile(r"-((?:win32|win_amd64|win_arm64)(?:\.[a-z0-9_]+)*)\.whl$")
# A Linux wheel's platform tag (PEP 600 manylinux_X_Y_ARCH, its legacy aliases, PEP 656
# musllinux, plain linux_ARCH), the first of a compressed tag set
_LINUX_TAG = re.compile(r"-((?:manylinux|musllinux|linux)[a-z0-9_]*)(?:\.[a-z0-9_]+)*\.whl$")


@dataclass(frozen=True)
class Platform:
    os: str  # "linux"
    architecture: str  # OCI spelling: "amd64", "arm64"
    variant: str = ""  # "v8" for arm64 (also the default when none is given)

    def __str__(self) -> str:
        return "/".join(p for p in (self.os, self.architecture, self.variant) if p)

    def accepts(self, offered: Platform) -> bool:
        """Whether an image for ``offered`` runs here (variants compared only when asked)."""
        if (self.os, self.architecture) != (offered.os, offered.architecture):
            return False
        return not self.variant or self.variant == _variant(offered)

    @property
    def elf_machine(self) -> str | None:
        """The ELF machine name of this architecture ("x86-64"), None when not known."""
        return ELF_MACHINE.get(self.architecture)


def _variant(p: Platform) -> str:
    return p.variant or ("v8" if p.architecture == "arm64" else "")


def parse_platform(text: str) -> Platform:
    """``linux/arm64``, ``linux/arm64/v8``, ``arm64``, or a wheel platform tag
    (``manylinux_2_28_aarch64``: the same ``--platform`` serves wheels and images).
    Raises ``UsageError`` for anything else."""
    tag = _WHEEL_TAG_ARCH.search(text)
    if tag and text.startswith(("manylinux", "musllinux", "linux")):
        return Platform("linux", _OCI_ARCH.get(tag.group(1), tag.group(1)))
    parts = text.strip().lower().split("/")
    if len(parts) == 1:
        parts = ["linux", *parts]
    if len(parts) > 3 or not all(re.fullmatch(r"[a-z0-9_]+", p) for p in parts):
        raise UsageError(f"--platform {text!r}: give os/arch[/variant] like linux/arm64")
    return Platform(parts[0], _OCI_ARCH.get(parts[1], parts[1]), parts[2] if len(parts) > 2 else "")


def host_platform() -> Platform:
    """This machine's platform (linux/amd64 on x86-64)."""
    machine = host.machine().lower()
    return Platform(host.system().lower() or "linux", _OCI_ARCH.get(machine, machine))


def _wheel_system(label: str, formats: Sequence[str]) -> tuple[str, str] | None:
    """(system, its platform tag or "") of a wheel: Windows' by its tag (``win_amd64``,
    ``win_arm64``, ``win32``), Linux' by its tag (``manylinux_*``, ``musllinux_*``,
    ``linux_*``), else by its native members all being PE images or all ELF; None for a wheel
    that says neither."""
    windows = _WINDOWS_TAG.search(label)
    if windows:
        return "Windows", windows.group(1)
    linux = _LINUX_TAG.search(label)
    if linux:
        return "Linux", linux.group(1)
    if formats and all(f == "pe" for f in formats):
        return "Windows", ""
    if formats and all(f == "elf" for f in formats):
        return "Linux", ""
    return None


def foreign_wheel_note(label: str, formats: Sequence[str], system: str = "") -> str | None:
    """What to say when a wheel of another system is judged here (``system``: this host's,
    ``platform.system()``): its device code is read (the same fatbins, the same verdicts) but
    it cannot be installed here. A Windows wheel on Linux, a Linux wheel on Windows. None for a
    wheel of this system or of none."""
    here = system or host.system() or "Linux"
    found = _wheel_system(label, formats)
    if found is None or found[0] == here:
        return None
    named = f" ({found[1]})" if found[1] else ""
    return (
        f"a {found[0]} wheel{named}: judged for its device code; it cannot be installed on this "
        f"{here} host"
    )


def install_note(platform_tag: str | None, system: str = "") -> str | None:
    """What a pip line for wheels chosen for ``platform_tag`` (``--platform win_amd64``) does
    on this host (``system``) when the tag is another system's: pip there chooses the wheel
    of this host's platform, which was not the one judged. None when the tag is this system's
    or names none."""
    here = system or host.system() or "Linux"
    found = _wheel_system(f"x-{platform_tag}.whl", ()) if platform_tag else None
    if found is None or found[0] == here:
        return None
    return (
        f"run it on a {found[0]} machine: there it installs the {platform_tag} wheel judged; on "
        f"this {here} host pip would choose another wheel of that version"
    )
