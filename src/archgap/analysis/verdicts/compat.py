"""Which device code runs on which GPU: the compatibility rules, implemented once.

Sources (see kb/gpus.json and the CUDA Programming Guide §1.3.4 and Table 28):
- SASS ``sm_XY`` runs on compute capability X.Z with Z >= Y, never across majors; on integrated
  (Tegra) GPUs never across minors, and never between desktop and Tegra (Orin 8.7 runs sm_87 only).
- ``sm_XYa`` / ``compute_XYa`` runs only on exactly X.Y.
- ``sm_XYf`` / ``compute_XYf`` runs on the members of its family at or above X.Y (a table).
- PTX ``compute_XY`` is JIT-compiled by the driver for any compute capability >= X.Y.
- A renumbered architecture (Thor: sm_101 in CUDA 12.8-12.9, sm_110 from CUDA 13.0): whether old
  cubins load under the new number is not documented, so the answer is "unknown".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, total_ordering

from archgap.errors import UsageError
from archgap.kb.gpus import (
    GpuProduct,
    close_names,
    default_matrix,
    family_members,
    find_products,
    identify,
    integrated,
    integrated_rule,
    known_capabilities,
    other_vendor,
    products,
    renumbered,
)

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


@dataclass(frozen=True)
class Compat:
    """Whether a cubin loads on a GPU: True, False, or None (not documented), and the rule."""

    runs: bool | None
    rule: str


def target_name(kind: str, arch: int, variant: str = "") -> str:
    """A build target as nvcc spells it: sm_120a (SASS, a cubin), compute_120a (PTX)."""
    return f"{'compute' if kind == 'ptx' else 'sm'}_{arch}{variant}"


def is_integrated(cc: ComputeCapability) -> bool:
    """An integrated (Tegra) GPU: Xavier 7.2, Orin 8.7, Thor 11.0 (10.1 before CUDA 13)."""
    return str(cc) in integrated()


@cache  # pure, over a few dozen targets and GPUs; asked once per entry row and GPU
def sass_compat(arch: int, variant: str, cc: ComputeCapability) -> Compat:
    """Whether an ``sm_<arch><variant>`` cubin loads on ``cc``, with the rule that decides."""
    target = ComputeCapability.of_arch(arch)
    for moved in renumbered():
        if str(target) == moved.old and str(cc) == moved.new:
            return Compat(None, f"{moved.undocumented} ({moved.source})")
    if variant == "a":
        return Compat(cc == target, f"sm_{arch}a runs only on {target}")
    if variant == "f":
        return Compat(_family_runs_on(arch, cc), f"sm_{arch}f runs on its family from {target}")
    if cc != target and (is_integrated(cc) or is_integrated(target)):
        rule, source = integrated_rule()
        which = cc if is_integrated(cc) else target
        return Compat(False, f"{which} is an integrated (Tegra) GPU: {rule} ({source})")
    runs = cc.major == target.major and cc.minor >= target.minor
    return Compat(runs, f"sm_{arch} runs on {target.major}.x from {target}")


def sass_runs_on(arch: int, variant: str, cc: ComputeCapability) -> bool:
    """Whether an ``sm_<arch><variant>`` cubin loads on a GPU of compute capability ``cc``."""
    return sass_compat(arch, variant, cc).runs is True


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
    host_cpu: str | None = None  # "aarch64" when the named product fixes it (GB10, Jetson, Grace)
    host_cpu_source: str = ""

    @property
    def gates_exit_code(self) -> bool:
        """A gap on a present or named GPU fails the run; the default matrix is information."""
        return self.role in ("present", "named")


def capability_host_cpu(cc: ComputeCapability) -> tuple[str | None, str]:
    """The host CPU a compute capability alone fixes, and why: the one every product of that
    capability has (8.7 is only Jetson Orin, 12.1 only GB10: aarch64). A number renamed since
    (Thor's 10.1, 11.0 from CUDA 13.0) is judged by what it became. (None, "") when the
    products disagree (9.0: H100 on x86-64 hosts, GH200 on Grace) or none is known."""
    renamed_by = next((r for r in renumbered() if r.old == str(cc)), None)
    number = renamed_by.new if renamed_by is not None else str(cc)
    same = [p for p in products() if p.compute_capability == number]
    hosts = {p.host_cpu for p in same}
    host = hosts.pop() if len(hosts) == 1 else None
    if host is None:
        return None, ""
    names = ", ".join(p.name for p in same[:3]) + (" …" if len(same) > 3 else "")
    renamed = f" ({cc} before CUDA {renamed_by.toolkit})" if renamed_by is not None else ""
    return host, f"kb/gpus.json: compute capability {number}{renamed} is only {names}, {host}"


class UnknownGpu(UsageError):
    """A --gpu value that is neither a compute capability nor a known product."""


def products_named(text: str) -> tuple[GpuProduct, ...]:
    """The products a GPU name denotes: those holding its every word ("H100"), else the one a
    driver-reported name identifies ("H100 PCIe", "Tesla V100-SXM2-32GB"). The one resolver of
    names, for --gpu/--require and for `archgap gpus`."""
    return find_products(text) or tuple(p for p in (identify(text),) if p is not None)


def resolve_gpu(text: str) -> GpuTarget:
    """A ``--gpu``/``--require`` value: a compute capability (known or not) or a product name."""
    cc = ComputeCapability.parse(text)
    bare = text.strip()
    if cc is not None:
        _refuse_bare_major(bare, cc)
        source = "compute capability given on the command line"
        return GpuTarget(bare, cc, "named", source, *capability_host_cpu(cc))
    matches = products_named(text)
    capabilities = sorted({m.compute_capability for m in matches})
    if len(capabilities) == 1:
        return _product_target(bare, matches, capabilities[0])
    raise _not_one_gpu(text, matches)


def _refuse_bare_major(bare: str, cc: ComputeCapability) -> None:
    """Refuse a bare major, one or two digits that name no known capability: "12" is not
    compute capability 1.2 but a mistake, not a GPU."""
    if bare.isdigit() and len(bare) <= 2 and str(cc) not in known_capabilities():
        raise UnknownGpu(
            f"GPU {bare!r} is a bare number: did you mean compute capability {bare}.0? "
            f"(give MAJOR.MINOR like {bare}.0, or sm_{bare}0)"
        )


def _product_target(bare: str, matches: tuple[GpuProduct, ...], capability: str) -> GpuTarget:
    """The target of a name whose products share one compute capability; its host CPU that of
    the products when they agree, else the capability's."""
    product = matches[0]
    names = ", ".join(m.name for m in matches[:3]) + (" …" if len(matches) > 3 else "")
    parsed = ComputeCapability.parse(capability)
    assert parsed is not None  # the knowledge base holds dotted capabilities only
    hosts = {m.host_cpu for m in matches}
    host = hosts.pop() if len(hosts) == 1 else None
    found = (host, f"kb/gpus.json: {product.name} host CPU") if host else None
    return GpuTarget(
        bare,
        parsed,
        "named",
        f"kb/gpus.json: {names} ({product.source})",
        *(found or capability_host_cpu(parsed)),
    )


def _not_one_gpu(text: str, matches: tuple[GpuProduct, ...]) -> UnknownGpu:
    """Why a name that is not one compute capability is refused: another vendor's GPU, no
    product (with the close names), or products of several capabilities."""
    if matches:
        options = "; ".join(f"{m.name} = {m.compute_capability}" for m in matches[:8])
        return UnknownGpu(f"GPU {text!r} is ambiguous: {options}")
    vendor = other_vendor(text)
    if vendor is not None:
        return UnknownGpu(
            f"GPU {text!r} is an {vendor.vendor} GPU, not a CUDA GPU: CUDA binaries run on "
            f"NVIDIA GPUs only, so archgap has nothing to judge for it ({vendor.source})"
        )
    close = close_names(text)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    return UnknownGpu(
        f"unknown GPU {text!r}: {hint}give a compute capability (12.0, sm_120) or a product "
        "name (RTX PRO 6000, H100, B200, GB10; `archgap gpus` lists them)"
    )


def matrix_targets() -> tuple[GpuTarget, ...]:
    """The default set of current GPUs, shown when none is present or named."""
    targets = []
    for entry in default_matrix():
        cc = ComputeCapability.parse(entry.compute_capability)
        assert cc is not None
        source = "kb/gpus.json default_matrix"
        # the host CPU as for a named capability: GB10 (12.1) systems are aarch64
        targets.append(GpuTarget(entry.label, cc, "matrix", source, *capability_host_cpu(cc)))
    return tuple(targets)
