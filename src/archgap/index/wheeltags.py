"""Whether a wheel is what its name says: the platform tags of its file name, the ``Tag`` lines
of its ``.dist-info/WHEEL`` and the ELF machine of its native files must agree. pip installs a
wheel by its file name's tags; a name that says x86_64 over aarch64 libraries installs on x86-64
machines where those libraries cannot load, so a disagreement is a problem of the wheel."""

from __future__ import annotations

import os
import urllib.parse
import zipfile
from collections import Counter
from collections.abc import Iterable

from packaging.tags import Tag, parse_tag
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from archgap.archives.wheel import WheelContents
from archgap.image.source import parse_platform
from archgap.probe.facts import Problem

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
    """Where the file name, ``WHEEL`` and the native files disagree on the CPU."""
    name = urllib.parse.unquote(os.path.basename(urllib.parse.urlsplit(contents.label).path))
    try:
        named = machines(parse_wheel_filename(name)[3])
    except InvalidWheelFilename:
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
    elf = Counter(b.machine for b in contents.binaries if b.machine)
    stray = {m: n for m, n in elf.items() if named and m not in named}
    if stray:
        cpu, files = max(stray.items(), key=lambda item: item[1])
        problems.append(
            Problem(
                contents.label,
                f"{files} native files are {cpu} but the file name says {_names(named)}: pip "
                f"installs it there, where they cannot load",
            )
        )
    return problems


def _names(found: set[str]) -> str:
    return ", ".join(sorted(found)) or "no CPU"
