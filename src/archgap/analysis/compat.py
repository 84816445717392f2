"""Which device code runs on which GPU: the compatibility rules, implemented once.

Sources (see kb/gpus.json and the CUDA Programming Guide §1.3.4 and Table 28):
- SASS ``sm_XY`` runs on compute capability X.Z with Z >= Y, never across majors.
- ``sm_XYa`` / ``compute_XYa`` runs only on exactly X.Y.
- ``sm_XYf`` / ``compute_XYf`` runs on the members of its family (a table, not a formula).
- PTX ``compute_XY`` is JIT-compiled by the driver for any compute capability >= X.Y.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

from archgap.kb.gpus import close_names, default_matrix, family_members, find_products

_CC_DOTTED = re.compile(r"^(\d{1,2})\.(\d)$")
_CC_SM = re.compile(r"^(?:sm_?|compute_?)?(\d{1,2})(\d)([af]?)$", re.IGNORECASE)


@total_ordering
@dataclass(frozen=True)
class ComputeCapability:
    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> ComputeCapability | None:
        """``12.0``, ``sm_120``, ``sm120``, ``compute_120``, ``120`` -> 12.0; anything else None."""
        text = text.strip()
        match = _CC_DOTTED.match(text) or _CC_SM.match(text)
        return cls(int(match.group(1)), int(match.group(2))) if match else None

    @classmethod
    def of_arch(cls, arch: int) -> ComputeCapability:
        """The compute capability an SM number names: 120 -> 12.0, 75 -> 7.5, 103 -> 10.3."""
        return cls(arch // 10, arch % 10)

    @property
    def sm(self) -> int:
        return self.major * 10 + self.minor

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, ComputeCapability):
            return NotImplemented
        return (self.major, self.minor) < (other.major, other.minor)


def _family_runs_on(arch: int, cc: ComputeCapability) -> bool:
    members = family_members().get(f"{arch}f")
    if members is not None:
        return str(cc) in members
    # A family no table knows yet: assume it is its own major, from its minor upwards.
    target = ComputeCapability.of_arch(arch)
    return cc.major == target.major and cc.minor >= target.minor


def sass_runs_on(arch: int, variant: str, cc: ComputeCapability) -> bool:
    """Whether an ``sm_<arch><variant>`` cubin loads on a GPU of compute capability ``cc``."""
    target = ComputeCapability.of_arch(arch)
    if variant == "a":
        return cc == target
    if variant == "f":
        return _family_runs_on(arch, cc)
    return cc.major == target.major and cc.minor >= target.minor


def ptx_jits_on(arch: int, variant: str, cc: ComputeCapability) -> bool:
    """Whether ``compute_<arch><variant>`` PTX can be JIT-compiled for ``cc`` (ISA aside)."""
    if variant:  # 'a' and 'f' PTX are exactly as portable as their SASS: not forward
        return sass_runs_on(arch, variant, cc)
    return cc >= ComputeCapability.of_arch(arch)


@dataclass(frozen=True)
class GpuTarget:
    """A GPU the verdicts are computed for."""

    label: str  # "NVIDIA RTX PRO 6000 Blackwell Server Edition (GPU 0-7)", "sm_120", "B200"
    compute_capability: ComputeCapability
    role: str  # "present" (on this machine), "named" (--gpu/--require), "matrix" (default set)
    source: str  # where the compute capability came from

    @property
    def gates_exit_code(self) -> bool:
        """A gap on a present or named GPU fails the run; the default matrix is information."""
        return self.role in ("present", "named")


class UnknownGpu(ValueError):
    """A --gpu value that is neither a compute capability nor a known product."""


def resolve_gpu(text: str) -> GpuTarget:
    """A ``--gpu``/``--require`` value: a compute capability (known or not) or a product name."""
    cc = ComputeCapability.parse(text)
    if cc is not None:
        return GpuTarget(text.strip(), cc, "named", "compute capability given on the command line")
    matches = find_products(text)
    capabilities = sorted({m.compute_capability for m in matches})
    if len(capabilities) == 1:
        product = matches[0]
        names = ", ".join(m.name for m in matches[:3]) + (" …" if len(matches) > 3 else "")
        parsed = ComputeCapability.parse(capabilities[0])
        assert parsed is not None  # the knowledge base holds dotted capabilities only
        return GpuTarget(text.strip(), parsed, "named", f"kb/gpus.json: {names} ({product.source})")
    if not matches:
        close = close_names(text)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise UnknownGpu(
            f"unknown GPU {text!r}: {hint}give a compute capability (12.0, sm_120) or a product "
            "name (RTX PRO 6000, H100, B200, GB10; `archgap gpus` lists them)"
        )
    options = "; ".join(f"{m.name} = {m.compute_capability}" for m in matches[:8])
    raise UnknownGpu(f"GPU {text!r} is ambiguous: {options}")


def matrix_targets() -> tuple[GpuTarget, ...]:
    """The default set of current GPUs, shown when none is present or named."""
    targets = []
    for entry in default_matrix():
        cc = ComputeCapability.parse(entry.compute_capability)
        assert cc is not None
        targets.append(GpuTarget(entry.label, cc, "matrix", "kb/gpus.json default_matrix"))
    return tuple(targets)
