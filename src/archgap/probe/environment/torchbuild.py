"""The torch build an environment holds, read from its files (never imported): the version and
CUDA of ``torch/version.py``, and the architecture tables of ``torch/utils/cpp_extension.py``
that decide what its extension builds target. Python 3.8 standard library only (the probe
travels).
"""

from __future__ import annotations

import os
import re
from typing import Iterable, List, Optional, Tuple

from ..facts import Problem, TorchBuild

_TORCH_VERSION_RE = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.M)
_TORCH_CUDA_RE = re.compile(r"""^cuda\s*(?::[^=]*)?=\s*(?:['"]([^'"]*)['"]|None)""", re.M)
_TORCH_ARCHES_RE = re.compile(r"supported_arches\s*=\s*\[([^\]]*)\]")
_TORCH_NAMED_RE = re.compile(r"named_arches\s*=\s*collections\.OrderedDict\(\[(.*?)\]\)", re.S)
_TORCH_NAMED_PAIR_RE = re.compile(r"""\(\s*['"]([^'"]+)['"]\s*,\s*['"]([^'"]+)['"]\s*\)""")


def torch_build(site_packages: Iterable[str], problems: List[Problem]) -> Optional[TorchBuild]:
    """The torch build of the environment: its version.py (version, CUDA) and cpp_extension's
    architecture tables; None without torch."""
    for site in site_packages:
        path = os.path.join(site, "torch", "version.py")
        if not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read(65536)
        except OSError as exc:
            problems.append(Problem(path, "unreadable: %s" % (exc.strerror or exc)))
            return None
        version = _TORCH_VERSION_RE.search(text)
        cuda = _TORCH_CUDA_RE.search(text)
        arches, named, arches_file = torch_supported_arches(site)
        return TorchBuild(
            version.group(1) if version else None,
            cuda.group(1) if cuda else None,
            path,
            arches,
            arches_file,
            named,
        )
    return None


def torch_supported_arches(
    site: str,
) -> Tuple[Optional[Tuple[str, ...]], Optional[Tuple[Tuple[str, str], ...]], Optional[str]]:
    """cpp_extension's ``supported_arches`` and ``named_arches`` (None where not found)."""
    path = os.path.join(site, "torch", "utils", "cpp_extension.py")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(4000000)
    except OSError:
        return None, None, None
    match = _TORCH_ARCHES_RE.search(text)
    named_match = _TORCH_NAMED_RE.search(text)
    named = tuple(_TORCH_NAMED_PAIR_RE.findall(named_match.group(1))) if named_match else None
    if not match:
        return None, named, path
    names = re.findall(r"""['"]([^'"]+)['"]""", match.group(1))
    return tuple(names), named, path
