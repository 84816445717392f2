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


def windows_wheel_note(label: str, formats: Sequence[str]) -> str | None:
    """What to say when a Windows wheel is judged on another system: its device code is read
    (the same fatbins, the same verdicts) but it cannot be installed here. A wheel is Windows'
    by its platform tag (``win_amd64``, ``win_arm64``, ``win32``) or, without one, by its native
    members all being PE images ("pe"). None on a Windows host, or for another wheel."""
    system = host.system() or "Linux"
    if system == "Windows":
        return None
    tag = _WINDOWS_TAG.search(label)
    if tag is None and not (formats and all(f == "pe" for f in formats)):
        return None
    named = f" ({tag.group(1)})" if tag else ""
    return (
        f"a Windows wheel{named}: judged for its device code; it cannot be installed on this "
        f"{system} host"
    )
