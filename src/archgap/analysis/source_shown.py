"""What ``gates`` and ``trace`` show of the facts: the gates of the kinds asked for and the
occurrences outside vendored, example and test trees (unless --all), with what was left out
counted per tree; with --gpu, the raises and asserts that reject a GPU and why. Pure: the
results (``results.GatesResult``, ``results.TraceResult``) carry what this decides and
``report.gates``/``report.trace`` render it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from archgap.analysis.trees import aside, ranked, relative_path

if TYPE_CHECKING:
    from archgap.analysis.verdicts.compat import GpuTarget
    from archgap.probe.facts import GatesFacts, GatesTarget, TraceFacts

GATE_KINDS = (
    "capability-call",
    "arch-list-call",
    "device-properties-call",
    "nvml-call",
    "comparison",
    "arch-env",
    "raise",
    "assert",
    "warning",
)


@dataclass(frozen=True)
class GatesLeftOut:
    """Gates not shown because their file is in a vendored, example or test tree."""

    gates: int
    functions: int
    trees: tuple[tuple[str, str, int], ...]  # (kind, tree path, gates), most gates first


def select_gates(
    facts: GatesFacts, kinds: tuple[str, ...], show_all: bool
) -> tuple[GatesFacts, GatesLeftOut]:
    """The facts with only the gates to show, and the count of those left out as aside."""
    counts: dict[tuple[str, str], int] = {}
    functions_out = 0
    targets: list[GatesTarget] = []
    for target in facts.targets:
        kept = []
        for function in target.functions:
            gates = tuple(g for g in function.gates if not kinds or g.kind in kinds)
            if not gates:
                continue
            tree = None if show_all else aside(relative_path(function.path, target.label))
            if tree is not None:
                counts[tree] = counts.get(tree, 0) + len(gates)
                functions_out += 1
                continue
            kept.append(replace(function, gates=gates))
        targets.append(replace(target, functions=tuple(kept)))
    left = GatesLeftOut(sum(counts.values()), functions_out, ranked(counts))
    return replace(facts, targets=tuple(targets)), left


@dataclass(frozen=True)
class GateRejection:
    """A raise or assert that the GPU's compute capability sends it to: ``certain`` when every
    branch above it is decided by the compute capability, else ``unless`` names the tests that
    are not (a CUDA version, a backend, an argument)."""

    path: str
    line: int
    gpu: str  # "RTX PRO 6000 (12.0)"
    certain: bool
    unless: tuple[str, ...] = ()


REJECTING = ("raise", "assert")


def rejecting(
    facts: GatesFacts, gpus: tuple[GpuTarget, ...]
) -> tuple[GatesFacts, tuple[GateRejection, ...]]:
    """The facts with only the gates that reject one of ``gpus`` (a raise the GPU's compute
    capability leads to; an assert whose test it makes false), and why each does. A gate whose
    branch the compute capability does not decide at all is not about the GPU: left out."""
    from archgap.analysis.gpu_conditions import gpu_decided, reach, split_condition

    found: list[GateRejection] = []
    targets: list[GatesTarget] = []
    for target in facts.targets:
        kept = []
        for function in target.functions:
            gates = []
            for gate in function.gates:
                if gate.kind not in REJECTING:
                    continue
                guards = split_condition(gate.condition)
                if gate.kind == "assert":  # it fails when its test is false
                    guards.append(("not", gate.detail))
                hits = []
                for gpu in gpus:
                    if not gpu_decided(guards, gpu.compute_capability):
                        continue
                    reached, unless = reach(guards, gpu.compute_capability)
                    if reached is not False:
                        name = f"{gpu.label} ({gpu.compute_capability})"
                        hits.append(
                            GateRejection(
                                function.path, gate.line, name, bool(reached), tuple(unless)
                            )
                        )
                if hits:
                    gates.append(gate)
                    found += hits
            if gates:
                kept.append(replace(function, gates=tuple(gates)))
        targets.append(replace(target, functions=tuple(kept)))
    return replace(facts, targets=tuple(targets)), tuple(found)


@dataclass(frozen=True)
class TraceLeftOut:
    occurrences: int
    files: int
    trees: tuple[tuple[str, str, int], ...]  # (kind, tree path, occurrences), most first


def select_trace(facts: TraceFacts, show_all: bool) -> tuple[TraceFacts, TraceLeftOut]:
    """The facts without the occurrences in aside trees (all of them with ``show_all``)."""
    root = facts.roots[0] if len(facts.roots) == 1 else ""
    counts: dict[tuple[str, str], int] = {}
    files: set[str] = set()
    kept = []
    for occurrence in facts.occurrences:
        tree = None if show_all else aside(relative_path(occurrence.path, root))
        if tree is None:
            kept.append(occurrence)
        else:
            counts[tree] = counts.get(tree, 0) + 1
            files.add(occurrence.path)
    left = TraceLeftOut(sum(counts.values()), len(files), ranked(counts))
    return replace(facts, occurrences=tuple(kept)), left
