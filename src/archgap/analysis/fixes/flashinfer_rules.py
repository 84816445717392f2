"""FlashInfer's own code, as data (kb/jit.json ``flashinfer``, per release range): how
``_normalize_cuda_arch`` turns a GPU into a target, how it reads FLASHINFER_CUDA_ARCH_LIST and
which -gencode target its JIT build emits. What FlashInfer will do (``analysis.jit.flashinfer``)
and the fixes for it (``analysis.fixes.engine``) both build on these."""

from __future__ import annotations

from dataclasses import dataclass

from archgap.kb import toolchain as kb


def target_name(major: int, minor_text: str) -> str:
    return f"compute_{major}{minor_text}"


@dataclass(frozen=True)
class Normalised:
    suffix: str | None  # the suffix nvcc gets for this GPU ("0f" -> minor+suffix below)
    minor_text: str | None  # "0f", "3a"
    raises: str | None  # the RuntimeError message raised instead


def normalise_arch(rng: kb.FlashinferRange, major: int, minor: int, cuda: str | None) -> Normalised:
    """FlashInfer's ``_normalize_cuda_arch`` for one version range, as data."""
    for step in rng.normalise:
        if step.major is not None and step.major != major:
            continue
        if step.major_min is not None and major < step.major_min:
            continue
        if step.minor is not None and step.minor != minor:
            continue
        if step.suffix is not None:
            return Normalised(step.suffix, f"{minor}{step.suffix}", None)
        have = kb.major_minor(cuda) if cuda else None
        for cuda_min, suffix, minor_text in step.needs:
            need = kb.major_minor(cuda_min)
            if have is not None and need is not None and have >= need:
                return Normalised(suffix, minor_text or f"{minor}{suffix}", None)
        return Normalised(None, None, step.raises)
    return Normalised("", str(minor), None)


def build_target(rng: kb.FlashinferRange, major: int, minor_text: str, cuda: str | None) -> str:
    """The -gencode target FlashInfer emits for one (major, minor) of TARGET_CUDA_ARCHS: from
    0.7.1 every module builds SM 10.7 as compute_100f when the nvcc it calls cannot build
    compute_107a; 0.6.16-0.7.0 the modules that opt in do (``rng.sm107_not_all``: the others)."""
    target = target_name(major, minor_text)
    lacks_107 = cuda is not None and not kb.toolkit_can_target(cuda, target)
    if rng.sm107_to_100f and target == "compute_107a" and lacks_107:
        return "compute_100f"
    return target


@dataclass(frozen=True)
class ArchListParse:
    archs: tuple[tuple[int, str], ...]
    error: str | None  # the exception `import flashinfer` raises


def parse_flashinfer_arch_list(
    value: str, rng: kb.FlashinferRange, cuda: str | None
) -> ArchListParse:
    """FLASHINFER_CUDA_ARCH_LIST as FlashInfer's own parser reads it (split(" "), split("."))."""
    archs: list[tuple[int, str]] = []
    for token in value.split(" "):
        parts = token.split(".")
        if len(parts) != 2:
            what = (
                "too many values to unpack (expected 2)"
                if len(parts) > 2
                else (f"not enough values to unpack (expected 2, got {len(parts)})")
            )
            return ArchListParse(tuple(archs), f"ValueError: {what}")
        major_text, minor = parts
        if not major_text.strip().lstrip("+-").isdigit():
            return ArchListParse(
                tuple(archs), f"ValueError: invalid literal for int() with base 10: {major_text!r}"
            )
        major = int(major_text)
        if not minor:
            return ArchListParse(tuple(archs), "IndexError: string index out of range")
        if minor[-1].isalpha() or rng.arch_list_verbatim:
            archs.append((major, minor))  # 0.5.0-0.6.6 take every entry as written
            continue
        if not minor.strip().lstrip("+-").isdigit():
            return ArchListParse(
                tuple(archs), f"ValueError: invalid literal for int() with base 10: {minor!r}"
            )
        norm = normalise_arch(rng, major, int(minor), cuda)
        if norm.raises:
            return ArchListParse(tuple(archs), f"RuntimeError: {norm.raises}")
        archs.append((major, norm.minor_text or minor))
    return ArchListParse(tuple(archs), None)
