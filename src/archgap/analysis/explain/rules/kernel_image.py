"""No kernel image: a kernel with no image for the GPU (a Jetson's own builds, an old GPU current
builds dropped, any other GPU a build of the package with its SASS; with several GPUs, one case
each)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from archgap.analysis.explain.causes import product_cc
from archgap.analysis.explain.rules.facts import CONDITIONAL, DETERMINED, Case, LogFacts, Ruling
from archgap.analysis.explain.rules.nvrtc import cupy_compiles
from archgap.analysis.explain.rules.words import gpu_words, release_after
from archgap.analysis.fixes.engine import ENV, UPGRADE, Fix, worded
from archgap.analysis.verdicts.compat import ComputeCapability, sass_runs_on
from archgap.kb import builds
from archgap.kb import toolchain as kb

# Packages whose own kernels a "no kernel image" names, most specific first.
_PACKAGES = ("onnxruntime", "jaxlib", "jax", "cupy", "ggml", "ctranslate2", "mxnet", "bellperson")


def no_kernel_image(facts: LogFacts) -> Ruling | None:
    """A kernel with no image for the GPU: a Jetson needs its own builds, an old GPU current
    builds dropped needs an old release, any other GPU a build of that package with its SASS."""
    named = {p.lower() for p in facts.stated.get("package", ())}
    package = next((p for p in _PACKAGES if p in named), None)
    what = package or "the failing package"
    if facts.tegra:
        return _jetson_build(what, facts, package)
    if len(facts.ccs) > 1:
        return _each_gpu("no-kernel-image", no_kernel_image, facts)
    if len(facts.ccs) != 1:
        return None
    if package == "cupy":
        return cupy_compiles(facts)
    cc = facts.ccs[0]
    sm = cc.replace(".", "")
    gpu = gpu_words(facts)
    below = _below_minimum(package, cc, gpu)
    if below is not None:
        return below
    last = kb.last_toolkit_for(f"sm_{sm}")
    if last is not None and kb.long_dropped(last):  # kb/toolkits.json "long_dropped"
        return Ruling(
            "no-kernel-image",
            f"{what} no longer ships sm_{sm}{gpu}: CUDA {release_after(last)} dropped it (the last "
            f"toolkit that builds it is {last}), so current builds leave it out",
            DETERMINED,
            (
                worded(
                    "kernel-image-older-release",
                    kind=UPGRADE,
                    package=what,
                    last=last,
                    sm=sm,
                    cc=cc,
                ),
            ),
        )
    fixes = (
        _build_with_sass(what, cc),
        worded(
            "kernel-image-rebuild",
            kind=ENV,
            package=what,
            cc=cc,
            switch=builds.build_switch(package, facts.names("torch")).for_gpu(cc),
        ),
    )
    return Ruling(
        "no-kernel-image",
        f"{what} was built without sm_{sm}{gpu}",
        DETERMINED if package else CONDITIONAL,
        fixes,
        () if package else ("which package's kernel failed: the traceback's frames",),
    )


def _build_with_sass(what: str, cc: str) -> Fix:
    """A build of the package with SASS that runs on ``cc``: its own target, or an older minor's
    plain SASS of its major, from the toolkit that first builds the oldest of them."""
    runs = _sass_that_runs(cc)
    first = kb.first_toolkit_for(runs[0])
    sm = cc.replace(".", "")
    if len(runs) > 1:
        return worded(
            "kernel-image-build-with-sass-or-older-minor",
            kind=UPGRADE,
            package=what,
            sm=sm,
            older=", ".join(runs[:-1]),
            cc=cc,
            first=first,
        )
    return worded(
        "kernel-image-build-with-sass", kind=UPGRADE, package=what, sm=sm, first=first, cc=cc
    )


def _below_minimum(package: str | None, cc: str, gpu: str) -> Ruling | None:
    """A GPU older than the oldest its package's released source says it supports: no build of
    it is meant to run there."""
    minimum = builds.minimums().get(package or "")
    if minimum is None or (kb.major_minor(cc) or (0, 0)) >= (kb.major_minor(minimum.cc) or (0, 0)):
        return None
    return Ruling(
        "no-kernel-image",
        f"{package} supports compute capability {minimum.cc} and newer only, and the GPU is "
        f"older{gpu}: its kernels are not built for it",
        DETERMINED,
        (
            worded(
                "kernel-image-below-minimum",
                kind=ENV,
                package=package,
                switch=minimum.cpu_switch,
                minimum=minimum.cc,
                source=minimum.source,
            ),
        ),
    )


def _sass_that_runs(cc: str) -> list[str]:
    """The plain SASS targets a desktop GPU runs, oldest first: sm_XY for X.Z with Z >= Y, within
    its major (12.1 runs sm_120 and sm_121), never a Tegra one (Orin's sm_87 on an 8.9), among
    the targets some toolkit builds."""
    major, minor = kb.major_minor(cc) or (0, 0)
    gpu = ComputeCapability(major, minor)  # compat's rule: a Tegra minor (8.7) runs on no other
    own = [f"sm_{major}{m}" for m in range(minor + 1) if sass_runs_on(major * 10 + m, "", gpu)]
    return [t for t in own if kb.first_toolkit_for(t)] or [f"sm_{major}{minor}"]


def _each_gpu(
    rule: str, judge: Callable[[LogFacts], Ruling | None], facts: LogFacts
) -> Ruling | None:
    """A log that names several GPUs: the rule judged for each, one case per GPU, since which
    GPU ran the failing kernel decides."""
    cases: list[Case] = []
    for cc in facts.ccs:
        names = [n for n in facts.stated.get("gpu", ()) if product_cc(n) == cc]
        one = replace(facts, ccs=(cc,), gpu_name=names[0] if names else "")
        ruling = judge(one)
        if ruling is not None:
            cases.append(
                Case(
                    f"if it ran on the {names[0] if names else 'GPU'} ({cc})",
                    ruling.cause,
                    ruling.fixes,
                )
            )
    if not cases:
        return None
    named = ", ".join(f"{c.when.removeprefix('if it ran on the ')}" for c in cases)
    cause = f"the log names {len(facts.ccs)} GPUs ({named}), and each needs its own kernels"
    decide = (
        "which GPU the failing process ran on: CUDA_VISIBLE_DEVICES, or "
        "`python -c 'import torch; print(torch.cuda.get_device_name())'` in it",
    )
    fixes = tuple(f for c in cases for f in c.fixes)
    return Ruling(rule, cause, CONDITIONAL, fixes, decide, tuple(cases))


def _jetson_build(what: str, facts: LogFacts, package: str | None) -> Ruling:
    cc = facts.ccs[0] if len(facts.ccs) == 1 else None
    arch = f"sm_{cc.replace('.', '')}" if cc else "the board's architecture"
    build = (
        builds.build_switch(package, facts.names("torch")).for_gpu(cc)
        if cc
        else "the board's compute capability (Orin 8.7, Xavier 7.2, Thor 11.0)"
    )
    return Ruling(
        "no-kernel-image",
        f"{what} has no kernels for {arch}{gpu_words(facts)}: a Jetson needs builds made for "
        "its own architecture (Tegra binaries do not run desktop SASS, and desktop or server "
        "aarch64 wheels leave Jetson out)",
        DETERMINED,
        (
            worded("kernel-image-jetpack", kind=UPGRADE, package=what),
            worded("kernel-image-build-on-board", kind=ENV, package=what, build=build),
        ),
    )
