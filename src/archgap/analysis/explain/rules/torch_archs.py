"""torch's arch list: its capability warning against the architectures it was built for, or
without the list, against the CUDA it was built with."""

from __future__ import annotations

from archgap.analysis.explain.causes import dotted
from archgap.analysis.explain.rules.facts import CONDITIONAL, DETERMINED, Case, LogFacts, Ruling
from archgap.analysis.explain.rules.words import dropped_words, gpu_words, version_of
from archgap.analysis.fixes.engine import UPGRADE, Fix, worded
from archgap.kb import toolchain as kb
from archgap.kb.load import install_names


def torch_archs(facts: LogFacts) -> Ruling | None:
    """torch's capability warning against its own arch list: SASS of X.Y runs on X.Z (Z >= Y)
    of a desktop GPU, so a newer minor of a built major is no gap; older or newer majors are."""
    built = _built(facts)
    cc = kb.major_minor(facts.ccs[0]) if len(facts.ccs) == 1 else None
    if cc is None:
        return None
    if not built:
        return _torch_cuda_build(cc, facts)
    gpu, dot = gpu_words(facts), f"{cc[0]}.{cc[1]}"
    runs = [b for b in built if b[0] == cc[0] and b[1] <= cc[1]]
    if runs and not facts.tegra:
        best = max(runs)
        cause = (
            f"no gap: this torch has sm_{best[0]}{best[1]} SASS, which runs on {dot} (same major, "
            f"newer minor){gpu}; the warning compares the arch list literally, so it is harmless"
        )
        return Ruling("torch-arch-list", cause, DETERMINED, ())
    if cc < built[0]:
        return _older_than_built(cc, built[0], facts)
    return _newer_than_built(cc, built[-1], facts)


def _built(facts: LogFacts) -> list[tuple[int, int]]:
    """The capabilities torch was built for, oldest first: its arch list's sm_ entries, else
    the lowest and highest its warning names."""
    listed = facts.first("torch_archs")
    low, high = facts.first("torch_cc_min"), facts.first("torch_cc_max")
    archs = [dotted(a) for a in listed.split() if a.startswith("sm_")] if listed else [low, high]
    return sorted({parts for a in archs if a and (parts := kb.major_minor(a))})


def _older_than_built(cc: tuple[int, int], oldest: tuple[int, int], facts: LogFacts) -> Ruling:
    """The GPU is older than the oldest architecture torch was built for."""
    name, dot = f"sm_{cc[0]}{cc[1]}", f"{cc[0]}.{cc[1]}"
    last = kb.last_toolkit_for(name)
    cause = (
        f"the GPU ({dot}){gpu_words(facts)} is older than the oldest architecture this torch "
        f"was built for (sm_{oldest[0]}{oldest[1]})"
    )
    return Ruling("torch-arch-list", cause, DETERMINED, (_older_torch(last, cc),))


def _newer_than_built(
    cc: tuple[int, int], newest: tuple[int, int], facts: LogFacts
) -> Ruling | None:
    """Nothing torch was built for runs on the GPU, newer than its list: a torch built with the
    CUDA that first builds the GPU's target (None for a target no release builds)."""
    name, dot = f"sm_{cc[0]}{cc[1]}", f"{cc[0]}.{cc[1]}"
    first = kb.first_toolkit_for(name)
    if first is None:
        return None
    cause = (
        f"this torch was built for up to sm_{newest[0]}{newest[1]}, nothing of which runs on "
        f"{dot}{gpu_words(facts)}: {name} needs a torch built with CUDA >= {first}"
    )
    return Ruling("torch-arch-list", cause, DETERMINED, (_newer_torch(first),))


def _newer_torch(first: str) -> Fix:
    """A torch built with a CUDA that builds the GPU's target, from that CUDA's index."""
    index, url = install_names().torch_index_of(first)
    return worded("torch-archs-newer-torch", kind=UPGRADE, first=first, index=index, url=url)


def _older_torch(last: str | None, cc: tuple[int, int]) -> Fix:
    """An older torch that still ships the GPU's target, or one built for it: built with the
    last CUDA that builds the target where a release dropped it; where none did (``last`` None),
    torch's own arch list left it out and no CUDA bound applies."""
    target, dot = f"sm_{cc[0]}{cc[1]}", f"{cc[0]}.{cc[1]}"
    if last is None:
        return worded("torch-archs-older-release", kind=UPGRADE, target=target, cc=dot)
    return worded("torch-archs-older-torch", kind=UPGRADE, last=last, target=target, cc=dot)


def _torch_cuda_build(cc: tuple[int, int], facts: LogFacts) -> Ruling | None:
    """torch's warning without its arch list: the CUDA torch was built with against the GPU's
    target (a CUDA older than the target cannot have built it; one newer than a release that
    dropped it did not), else the arch list decides."""
    name, dot, gpu = f"sm_{cc[0]}{cc[1]}", f"{cc[0]}.{cc[1]}", gpu_words(facts)
    span = kb.toolkit_range_for(name)
    built = facts.torch_cuda
    how = "torch's arch list: `python -c 'import torch; print(torch.cuda.get_arch_list())'`"
    if span is None:
        return None
    first, last = span
    newer, older = _newer_torch(first), _older_torch(last, cc)
    if built and version_of(built) < version_of(first):
        cause = (
            f"this torch was built with CUDA {built}, older than {name}{gpu}: {name} needs "
            f"CUDA >= {first}"
        )
        return Ruling("torch-arch-list", cause, DETERMINED, (newer,))
    if built and last and version_of(built) > version_of(last):
        cause = (
            f"this torch was built with CUDA {built}{gpu}, and {dropped_words(name, last)}: "
            f"its wheels leave the GPU out"
        )
        return Ruling("torch-arch-list", cause, DETERMINED, (older,))
    cases = [
        Case(f"if the list's newest is older than {name}", f"torch predates the GPU{gpu}", (newer,))
    ]
    cases.append(
        Case(f"if the list's oldest is newer than {name}", f"torch dropped the GPU{gpu}", (older,))
    )
    cause = (
        f"this torch's arch list has nothing that runs on {dot}{gpu}; the log does not print "
        f"the list"
    )
    return Ruling("torch-arch-list", cause, CONDITIONAL, (newer, older), (how,), tuple(cases))
