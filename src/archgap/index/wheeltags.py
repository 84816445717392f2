"""Whether a wheel is what its name says: the platform tags of its file name, the ``Tag`` lines
of its ``.dist-info/WHEEL`` and the ELF machine of its native files must agree. pip installs a
wheel by its file name's tags; a name that says x86_64 over aarch64 libraries installs on x86-64
machines where those libraries cannot load (``strays``: a gap of every GPU, in ``scan`` and the
``kernels`` gate); a WHEEL file that says another CPU than the name is a problem of the wheel."""

from __future__ import annotations

import os
import urllib.parse
import zipfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.tags import Tag, parse_tag
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from archgap.archives.platform import parse_platform
from archgap.archives.wheel import WheelContents
from archgap.probe.facts import BinaryFacts, Problem

MAX_WHEEL_FILE = 64 << 10  # a WHEEL file is a few lines


def machines(tags: Iterable[Tag]) -> set[str]:
    """The ELF machines the tags' platforms name (``any`` and unknown ones name none)."""
    found = set()
    for tag in tags:
        try:
            machine = parse_platform(tag.platform).elf_machine
        except ValueError:
            continue
        if machine and tag.platform != "any":
            found.add(machine)
    return found


def wheel_file_tags(zf: zipfile.ZipFile) -> set[Tag] | None:
    """The ``Tag`` lines of the wheel's ``.dist-info/WHEEL``; None without one."""
    names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/WHEEL")]
    if not names:
        return None
    with zf.open(names[0]) as stream:
        text = stream.read(MAX_WHEEL_FILE).decode("utf-8", "replace")
    found: set[Tag] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() == "tag" and value.strip():
            try:
                found |= set(parse_tag(value.strip()))
            except ValueError:
                continue
    return found


def tag_problems(contents: WheelContents, zf: zipfile.ZipFile) -> list[Problem]:
    """Where the file name and ``WHEEL`` disagree on the CPU. The files still load where pip
    installs the wheel (by its name) when they are for the CPU it names: ``strays`` says
    which are not, and they fail a gate."""
    named = _named(contents.label)
    if named is None:
        return []
    problems = []
    declared = wheel_file_tags(zf)
    if declared is not None and machines(declared) and machines(declared) != named:
        problems.append(
            Problem(
                contents.label,
                f"the file name says {_names(named)} but its WHEEL file's Tag says "
                f"{_names(machines(declared))}: pip installs it by the name",
            )
        )
    return problems


@dataclass(frozen=True)
class Stray:
    """Native files of a wheel built for a CPU its file name does not name."""

    wheel: str  # the wheel's path or URL
    cpu: str  # their ELF machine
    files: int
    named: str  # the CPUs the name says ("x86-64")

    @property
    def reason(self) -> str:
        what, they = (
            ("1 native file is", "it")
            if self.files == 1
            else (f"{self.files} native files are", "they")
        )
        return (
            f"{what} {self.cpu} but the file name of {self.wheel} says {self.named}: pip "
            f"installs a wheel by its name, on {self.named} machines, where {they} cannot load"
        )


def strays(binaries: Iterable[BinaryFacts]) -> list[Stray]:
    """Per wheel (a member's path is ``WHEEL/MEMBER``), its native files' most common ELF
    machine that its file name's platform tags do not name; ``any`` names every CPU."""
    found: dict[str, Counter[str]] = {}
    for binary in binaries:
        wheel, inside, _ = binary.path.partition(".whl/")
        if inside and binary.machine:
            found.setdefault(wheel + ".whl", Counter())[binary.machine] += 1
    result = []
    for wheel, counts in found.items():
        named = _named(wheel) or set()
        stray = {cpu: n for cpu, n in counts.items() if named and cpu not in named}
        if stray:
            cpu, files = max(stray.items(), key=lambda item: item[1])
            result.append(Stray(wheel, cpu, files, _names(named)))
    return result


def _named(wheel: str) -> set[str] | None:
    """The CPUs the wheel's file name names; None for no wheel file name."""
    name = urllib.parse.unquote(os.path.basename(urllib.parse.urlsplit(wheel).path))
    try:
        return machines(parse_wheel_filename(name)[3])
    except InvalidWheelFilename:
        return None


def _names(found: set[str]) -> str:
    return ", ".join(sorted(found)) or "no CPU"
