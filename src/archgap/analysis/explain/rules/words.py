"""Words and numbers every rule family uses: the GPU in a cause, CUDA releases and versions."""

from __future__ import annotations

from archgap.analysis.explain.rules.facts import LogFacts
from archgap.kb import toolchain as kb


def version_of(text: str) -> tuple[int, int]:
    return kb.major_minor(text) or (0, 0)


def dropped_words(target: str, last: str | None) -> str:
    if last is None:
        return ""
    return (
        f"CUDA {release_after(last)} dropped {target} (the last toolkit that builds it is {last})"
    )


def gpu_words(facts: LogFacts) -> str:
    """ " (the GPU: GeForce RTX 5090, 12.0)" for the cause's wording; "" with no single GPU."""
    if len(facts.ccs) != 1:
        return ""
    named = f"{facts.gpu_name}, " if facts.gpu_name else ""
    return f" (the GPU: {named}{facts.ccs[0]})"


def torch_list(facts: LogFacts, cc: str | None = None) -> str:
    """', TORCH_CUDA_ARCH_LIST="6.1"' (the bare name without ``cc``) to add to a build's switches
    where the log shows torch, whose extension builder alone reads it; "" where it does not."""
    if not facts.names("torch"):
        return ""
    return f', TORCH_CUDA_ARCH_LIST="{cc}"' if cc else ", TORCH_CUDA_ARCH_LIST"


def release_after(cuda: str) -> str:
    releases = [r.cuda for r in kb.toolkit_releases()]
    return releases[releases.index(cuda) + 1] if cuda in releases[:-1] else "a later release"


def major_of(cuda: str | None) -> int:
    parts = kb.major_minor(cuda or "")
    return parts[0] if parts else 0
