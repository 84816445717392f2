"""TORCH_CUDA_ARCH_LIST as torch's cpp_extension reads it, and what the build then gives each GPU.

Modelled on ``torch/utils/cpp_extension.py _get_cuda_arch_flags`` (2.14.1, read from the
installed wheel): spaces become ``;``, named architectures ("Hopper", "Blackwell", ...) are
replaced in order, every entry must be in ``supported_arches`` (else ValueError "Unknown CUDA
arch"), and each entry ``X.Y[a][+PTX]`` becomes ``-gencode=arch=compute_XY[a],code=sm_XY[a]``
(plus ``code=compute_XY`` for +PTX). nvcc must know each target (CUDA 13 dropped compute_70), and
a GPU is served only by SASS that runs on it or by PTX the driver can JIT (compat rules).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from archgap.analysis.fixes.engine import Fix, toolkit_limit, worded
from archgap.analysis.verdicts.compat import GpuTarget, ptx_jits_on, sass_runs_on, target_name
from archgap.kb import toolchain as kb
from archgap.probe.facts import TorchBuild


@dataclass(frozen=True)
class ArchEntry:
    text: str  # "12.0a+PTX"
    arch: int  # 120
    variant: str  # "", "a"
    ptx: bool

    @property
    def target(self) -> str:
        return target_name("ptx", self.arch, self.variant)


@dataclass(frozen=True)
class ArchList:
    entries: tuple[ArchEntry, ...]
    unknown: tuple[str, ...]  # entries torch rejects ("Unknown CUDA arch")
    valid: tuple[str, ...]
    valid_source: str
    definitive: bool  # read from the installed torch (not kb fallback)


def _for_version(
    version: str, entries: tuple[kb.VersionedArchs, ...]
) -> tuple[kb.VersionedArchs, ...]:
    return tuple(e for e in entries if kb.version_in_range(version, e.low, e.high_excl))


def parse_arch_list(value: str, torch: TorchBuild) -> ArchList:
    """The entries torch builds from ``value``, the ones it rejects, and the names it accepts."""
    version = torch.version or "?"
    valid = torch.supported_arches
    source = f"{torch.supported_arches_file} (supported_arches)"
    if valid is None:
        rules = kb.jit_rules().torch_ext
        valid = tuple(
            sorted({a for e in _for_version(version, rules.valid_archs) for a in e.archs})
        )
        source = "kb/jit.json torch_ext.valid_archs"
    named = torch.named_arches
    if named is None:
        named = tuple(
            n for e in _for_version(version, kb.jit_rules().torch_ext.named_archs) for n in e.names
        )
    text = value.replace(" ", ";")
    for name, archs in named:
        text = text.replace(name, archs)
    entries, unknown = [], []
    for token in text.split(";"):
        arch = token.removesuffix("+PTX")
        if arch not in valid:
            unknown.append(token)
            continue
        major, _, minor = arch.partition(".")
        variant = minor[1:] if minor[1:] in ("a", "f") else ""
        entries.append(ArchEntry(token, int(major) * 10 + int(minor[:1]), variant, token != arch))
    return ArchList(
        tuple(entries), tuple(unknown), valid, source, torch.supported_arches is not None
    )


def serves(entry: ArchEntry, target: GpuTarget) -> bool:
    cc = target.compute_capability
    if sass_runs_on(entry.arch, entry.variant, cc):
        return True
    return entry.ptx and ptx_jits_on(entry.arch, entry.variant, cc)


def unbuildable(entries: Sequence[ArchEntry], nvcc: str) -> list[ArchEntry]:
    return [e for e in entries if not kb.toolkit_can_target(nvcc, e.target)]


def drop_or_toolkit_fixes(bad: Sequence[ArchEntry], nvcc: str) -> tuple[Fix, ...]:
    limits = sorted({limit for e in bad if (limit := toolkit_limit(e.target))})
    entries, targets = ", ".join(e.text for e in bad), ", ".join(e.target for e in bad)
    fixes = [worded("torch-ext-drop-arch", kind="env", entries=entries, nvcc=nvcc, targets=targets)]
    if limits:
        dropped: dict[str, list[str]] = {}  # the release that dropped each (kb/toolkits.json)
        for e in bad:
            if (cuda := kb.dropped_in(e.target)) is not None:
                dropped.setdefault(cuda, []).append(e.target)
        said = "; ".join(f"CUDA {c} dropped {', '.join(t)}" for c, t in sorted(dropped.items()))
        toolkits = " and ".join(limits)
        fixes.append(
            worded("torch-ext-toolkit-dropped", kind="toolkit", toolkits=toolkits, dropped=said)
            if said
            else worded("torch-ext-toolkit", kind="toolkit", toolkits=toolkits)
        )
    return tuple(fixes)


def exact_entry_fix(target: GpuTarget, valid: Sequence[str], nvcc: str | None) -> tuple[Fix, ...]:
    """Add this GPU's own entry (its exact compute capability) if torch accepts it."""
    cc = target.compute_capability
    for text in (f"{cc}", f"{cc}a"):
        entry_target = f"compute_{cc.sm}{text[3:] if text.endswith('a') else ''}"
        if text in valid and (nvcc is None or kb.toolkit_can_target(nvcc, entry_target)):
            return (
                worded(
                    "torch-ext-add-arch", kind="env", entry=text, cc=cc, gpu=target.label, sm=cc.sm
                ),
            )
    return ()
