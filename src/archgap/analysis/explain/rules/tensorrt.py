"""TensorRT: its SM gate against kb/tensorrt.json (the release predates the GPU, or dropped it;
on a Jetson, a TensorRT that is not the board's JetPack one)."""

from __future__ import annotations

from archgap.analysis.explain.causes import dotted
from archgap.analysis.explain.rules.facts import CONDITIONAL, DETERMINED, LogFacts, Ruling
from archgap.analysis.explain.rules.words import gpu_words
from archgap.analysis.fixes.engine import TOOLKIT, UPGRADE, Fix, worded
from archgap.kb import toolchain as kb
from archgap.kb.tensorrt import TensorrtSupport, tensorrt_on_jetson, tensorrt_support

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
        fix = worded("tensorrt-listed-release", kind=UPGRADE, cc=cc)
        why = "which TensorRT releases support the GPU: the TensorRT support matrix"
        cause = f"{said} does not build engines for SM {cc}{gpu}"
        return Ruling("tensorrt-sm", cause, CONDITIONAL, (fix,), (why,))
    dropped = _dropped(version, known)
    if not dropped and facts.tegra:
        return _tensorrt_on_jetson(said, cc, gpu)
    if not dropped and _supported(version, known):
        return None  # a release the table says builds the GPU: its SM gate has another cause
    cause, fix = _dropped_gap(said, cc, gpu, known) if dropped else _early_gap(said, cc, gpu, known)
    if version:
        return Ruling("tensorrt-sm", cause, DETERMINED, (fix,))
    return Ruling("tensorrt-sm", cause, CONDITIONAL, (fix,), (_TRT_VERSION_HOW,))


def _dropped(version: str | None, known: TensorrtSupport) -> bool:
    """Whether the TensorRT in use dropped the SM: its version is past the table's last release
    for it; with no version, whether the table has a last release and no first."""
    have = kb.major_minor(version) if version else None
    last = kb.major_minor(known.last) if known.last else None
    return bool((have and last and have > last) or (not have and last and not known.first))


def _supported(version: str | None, known: TensorrtSupport) -> bool:
    """Whether the table says the TensorRT version in use builds the SM (it is at least the
    first release for it; not past the last: see ``_dropped``)."""
    have = kb.major_minor(version) if version else None
    first_at = kb.major_minor(known.first) if known.first else None
    return have is not None and (first_at is None or have >= first_at)


def _dropped_gap(said: str, cc: str, gpu: str, known: TensorrtSupport) -> tuple[str, Fix]:
    """(cause, fix) of a TensorRT newer than the last release that builds the SM."""
    cause = (
        f"{said} dropped SM {cc}{gpu}: the release is newer than the GPU's support (the "
        f"last release that builds it is {known.last})"
    )
    fix = worded("tensorrt-older", kind=TOOLKIT, last=known.last, cc=cc, source=known.source)
    return cause, fix


def _early_gap(said: str, cc: str, gpu: str, known: TensorrtSupport) -> tuple[str, Fix]:
    """(cause, fix) of a TensorRT older than the first release that supports the SM."""
    first = known.first or "a later release"
    cause = f"{said} predates SM {cc}{gpu}: the first release that supports it is {first}"
    fix = worded("tensorrt-upgrade", kind=UPGRADE, first=first, source=known.source)
    return cause, fix


def _tensorrt_on_jetson(said: str, cc: str, gpu: str) -> Ruling:
    """A Jetson's SM rejected by a TensorRT the support table does not rule out: the TensorRT in
    use is not the board's JetPack one (another platform's build, or another JetPack's)."""
    jetson = tensorrt_on_jetson()
    cause = (
        f"{said} has no engines for SM {cc}{gpu}, a Jetson: it is not the board's JetPack "
        f"TensorRT ({jetson.text})"
    )
    fix = worded("tensorrt-jetpack", kind=TOOLKIT, source=jetson.source)
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
