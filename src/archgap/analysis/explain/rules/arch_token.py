"""An arch token that is not an architecture: a compiler rejected `compute_1.`, `sm_`, `compute_`,
`native` or `all`. No CUDA release has such a target, so no toolkit is too old or too new for it:
the build script that derived the arch list (DeepSpeed's op_builder parsing TORCH_CUDA_ARCH_LIST or
the GPU's capability, a Makefile's -arch=native) produced it. nvcc's documented values for
--gpu-architecture are compute_XY / sm_XY (with an 'a' or 'f' suffix) and the special values
`native` (CUDA 11.6+), `all` and `all-major` (CUDA 11.5+); ptxas's --gpu-name takes sm_XY only."""

from __future__ import annotations

import re
from collections.abc import Iterable

from archgap.analysis.explain.rules.facts import DETERMINED, PTXAS, LogFacts, Ruling
from archgap.analysis.explain.rules.words import gpu_words
from archgap.analysis.fixes.engine import ENV, worded

NVCC_DOC = "https://docs.nvidia.com/cuda/cuda-compiler-driver-nvcc/index.html#gpu-architecture-arch"
# The special values nvcc takes for -arch, and the first CUDA that takes each (nvcc's option
# reference; CUDA 11.5 and 11.6 release notes: "-arch=all|all-major", "-arch=native").
SPECIAL = {"native": "11.6", "all": "11.5", "all-major": "11.5"}
_QUOTED = re.compile(
    r"(?:architecture|Value|gpu-name=?|gpu-architecture=?)\s*'?(?P<token>[^'\s]{0,24})'?", re.I
)
_ARCH = re.compile(r"(?:sm|compute|lto)_\d{2,3}[af]?")


def arch_token(error: str) -> str | None:
    """The token the compiler rejected when it is not an architecture name (None when it is one,
    or when the message quotes none)."""
    found = _QUOTED.search(error)
    if not found:
        return None
    token = found.group("token")
    if _ARCH.fullmatch(token):
        return None
    if token.lower() in SPECIAL or re.fullmatch(r"(?:sm|compute|lto)_\S*", token):
        return token
    return None


def not_an_arch(error: str, facts: LogFacts, tool: str) -> Ruling | None:
    """The ruling for a rejected token that names no architecture: the build script's arch
    detection or parsing, never the toolkit's age."""
    token = arch_token(error)
    if token is None:
        return None
    cc = facts.ccs[0] if len(facts.ccs) == 1 else "<CC>"
    plain = cc.replace(".", "")
    explicit = worded("arch-token-explicit-list", kind=ENV, cc=cc, sm=plain, token=token)
    special = SPECIAL.get(token.lower())
    if special:
        where = "ptxas takes only sm_XY" if tool == PTXAS else f"nvcc takes it from CUDA {special}"
        cause = (
            f"the build passed '{token}' as the architecture, a special value, not a target "
            f"({where}): the build script's arch selection, not the toolkit's support for the GPU"
        )
    else:
        cause = (
            f"'{token}' is not an architecture (no CUDA release has such a target): the build "
            f"script's arch detection or parsing produced it (e.g. DeepSpeed's op_builder "
            f"parsing TORCH_CUDA_ARCH_LIST or the GPU's capability), not the toolkit's age; "
            f"a toolkit switch does not fix it"
        )
    return Ruling("arch-token", f"{cause}{gpu_words(facts)}", DETERMINED, (explicit,))


# nvcc's own flags that name a target of the build (nvcc's option reference: -arch /
# --gpu-architecture, -code / --gpu-code, -gencode / --generate-code arch=...,code=...).
_BUILD_FLAG = re.compile(
    r"(?:--?(?:gpu-architecture|arch|gpu-code|code)[= ]|arch=|code=)\s*"
    r"['\"\[]?(?:sm|compute)_(?P<sm>\d{2,3})[af]?\b",
    re.I,
)
# Builds that target the GPU they run on (their flags are the GPU's own): FlashInfer's JIT in
# ~/.cache/flashinfer, torch's extensions in ~/.cache/torch_extensions, Triton's compiles.
_JIT_BUILD = re.compile(r"(?i)[/\\]\.cache[/\\]|torch_extensions|flashinfer|triton")


def build_targets(lines: Iterable[str]) -> frozenset[str]:
    """The targets ("30", "120") a build command in the log names with nvcc's flags, except in a
    command of a JIT that builds for the GPU it runs on: a target of the build, which says
    nothing of the GPU (a build script for sm_30 runs on any machine)."""
    return frozenset(
        m.group("sm")
        for line in lines
        if not _JIT_BUILD.search(line)
        for m in _BUILD_FLAG.finditer(line)
    )
