"""TensorRT: its SM gate against kb/tensorrt.json (the release predates the GPU, or dropped it;
on a Jetson, a TensorRT that is not the board's JetPack one)."""

from __future__ import annotations

from archgap.analysis.explain.causes import dotted
from archgap.analysis.explain.rules.facts import CONDITIONAL, DETERMINED, LogFacts, Ruling
from archgap.analysis.explain.rules.words import gpu_words
from archgap.analysis.fixes.engine import TOOLKIT, UPGRADE, Fix
from archgap.kb import toolchain as kb
from archgap.kb.tensorrt import tensorrt_on_jetson, tensorrt_support

_TRT_VERSION_HOW = (
    "the TensorRT version: `python -c 'import tensorrt; print(tensorrt.__version__)'` "
    "(or `dpkg -l | grep nvinfer`)"
)


def tensorrt(facts: LogFacts) -> Ruling | None:
    """TensorRT's SM gate against kb/tensorrt.json: the release predates the GPU, or dropped it."""
    cc = _trt_cc(facts)
    if cc is None:
        return None
    version = _trt_version(facts)
    known = tensorrt_support().get(cc)
    gpu = gpu_words(facts)
    said = f"TensorRT {version}" if version else "this TensorRT"
    if known is None:
        fix = Fix(f"a TensorRT release whose support matrix lists SM {cc}", "", kind=UPGRADE)
        why = "which TensorRT releases support the GPU: the TensorRT support matrix"
        cause = f"{said} does not build engines for SM {cc}{gpu}"
        return Ruling("tensorrt-sm", cause, CONDITIONAL, (fix,), (why,))
    have = kb.major_minor(version) if version else None
    last = kb.major_minor(known.last) if known.last else None
    first_at = kb.major_minor(known.first) if known.first else None
    dropped = (have and last and have > last) or (not have and last and not known.first)
    if have and not dropped and (first_at is None or have >= first_at) and not facts.tegra:
        return None  # a release the table says builds the GPU: its SM gate has another cause
    if facts.tegra and not dropped:
        return _tensorrt_on_jetson(said, cc, gpu)
    if dropped:
        cause = (
            f"{said} dropped SM {cc}{gpu}: the release is newer than the GPU's support (the "
            f"last release that builds it is {known.last})"
        )
        fix = Fix(f"TensorRT <= {known.last} (it supports SM {cc})", known.source, kind=TOOLKIT)
    else:
        first = known.first or "a later release"
        cause = f"{said} predates SM {cc}{gpu}: the first release that supports it is {first}"
        fix = Fix(
            f"upgrade to TensorRT >= {first} (with the CUDA and cuDNN it requires)",
            known.source,
            kind=UPGRADE,
        )
    if version:
        return Ruling("tensorrt-sm", cause, DETERMINED, (fix,))
    return Ruling("tensorrt-sm", cause, CONDITIONAL, (fix,), (_TRT_VERSION_HOW,))


def _tensorrt_on_jetson(said: str, cc: str, gpu: str) -> Ruling:
    """A Jetson's SM rejected by a TensorRT the support table does not rule out: the TensorRT in
    use is not the board's JetPack one (another platform's build, or another JetPack's)."""
    jetson = tensorrt_on_jetson()
    cause = (
        f"{said} has no engines for SM {cc}{gpu}, a Jetson: it is not the board's JetPack "
        f"TensorRT ({jetson.text})"
    )
    fix = Fix(
        "use the TensorRT of the board's JetPack (its nvinfer packages, or an L4T / JetPack "
        "container of that release): drop a pin to a TensorRT built for another platform or "
        "JetPack",
        jetson.source,
        kind=TOOLKIT,
    )
    return Ruling("tensorrt-sm", cause, DETERMINED, (fix,))


def _trt_cc(facts: LogFacts) -> str | None:
    """TensorRT's SM: "0x809" (hex major, two decimal digits of minor) -> 8.9, "120" -> 12.0."""
    packed = facts.first("tensorrt_sm_hex")
    if packed:
        return f"{int(packed[0], 16)}.{int(packed[1:])}"
    value = facts.first("tensorrt_sm")
    if value:
        return dotted(value)
    return facts.ccs[0] if len(facts.ccs) == 1 else None


def _trt_version(facts: LogFacts) -> str | None:
    """ "100700" (trtexec's banner) -> 10.7.0; "8.2.1.8" as written."""
    for value in facts.stated.get("tensorrt", ()):
        if value.isdigit():
            return f"{int(value[:-4])}.{int(value[-4:-2])}.{int(value[-2:])}"
        return value
    return None
