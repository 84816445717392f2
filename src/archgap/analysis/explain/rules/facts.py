"""The facts a rule reads: what the log states beyond the recognised message (``log_facts``), and
what a rule answers (``Ruling``, with the cases of a conditional one, ``Case``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from archgap.analysis.explain.logparse import ParsedLog
from archgap.analysis.fixes.engine import Fix
from archgap.kb import toolchain as kb
from archgap.kb.gpus import integrated

NVCC, NVRTC, TRITON, XLA, DRIVER, PTXAS, TENSORRT = (
    "nvcc",
    "NVRTC",
    "Triton's bundled ptxas",
    "XLA's ptxas",
    "the driver's JIT linker",
    "ptxas",
    "TensorRT",
)
DETERMINED, CONDITIONAL = "determined", "conditional"

# Which tool printed an error, from the tool words the log's evidence holds (kb/evidence.json);
# the first tool whose word is there wins: the driver's linker prints ptxas's words, XLA and
# Triton both run a ptxas, and any of them may sit in a log that also mentions nvcc.
_TOOL_ORDER: tuple[tuple[str, frozenset[str]], ...] = (
    (
        DRIVER,
        frozenset(("culinkadddata", "linkererror", "nvjitlink", "cumoduleload", "drivererror")),
    ),
    (TENSORRT, frozenset(("tensorrt", "trt", "trtexec", "nvinfer1"))),
    (NVRTC, frozenset(("nvrtc",))),
    (XLA, frozenset(("asm_compiler", "stream_executor"))),
    (TRITON, frozenset(("triton", "ptxas-blackwell"))),
    (NVCC, frozenset(("nvcc",))),
)


@dataclass(frozen=True)
class LogFacts:
    tool: str  # which tool printed the error ("" when the log does not say)
    toolkit: str | None  # the CUDA version of the toolkit the log states
    ccs: tuple[str, ...]  # the GPU's compute capability, dotted
    gpu_name: str  # the GPU as the log names it ("" when it does not)
    tegra: bool  # a Jetson / integrated GPU
    driver: str | None  # the driver version the log states
    stated: dict[str, tuple[str, ...]]  # the log's other evidence by kind (PTX ISA, TensorRT ...)
    frames: tuple[str, ...] = ()  # the files of the last traceback, innermost last
    torch_cuda: str | None = None  # the CUDA torch was built with ("+cu101", "CUDA used to build")

    def first(self, kind: str) -> str | None:
        values = self.stated.get(kind, ())
        return values[0] if values else None

    def names(self, package: str) -> bool:
        """Whether the log shows ``package`` ("torch", "cupy"): a fact of it ("torch_cuda"),
        the package named, or a traceback frame inside it."""
        return (
            any(kind.startswith(package) for kind in self.stated)
            or package in self.stated.get("package", ())
            or any(f"/{package}/" in f.replace("\\", "/") for f in self.frames)
        )


@dataclass(frozen=True)
class Case:
    """One way a conditional ruling can go: the fact's value that leads there, its cause and
    fixes."""

    when: str  # "if nvcc is CUDA > 12.9"
    cause: str
    fixes: tuple[Fix, ...]


@dataclass(frozen=True)
class Ruling:
    rule: str  # the rule that decided ("toolkit-target", "ptx-isa", ...)
    cause: str
    status: str  # DETERMINED, CONDITIONAL
    fixes: tuple[Fix, ...]
    decide: tuple[str, ...] = ()  # the facts that would decide a conditional ruling
    cases: tuple[Case, ...] = ()  # a conditional ruling's cases, one per value of that fact


def log_facts(log: ParsedLog, ccs: Sequence[str]) -> LogFacts:
    """The facts the rules read from a parsed log, for the GPU's compute capabilities ``ccs``."""
    stated = _stated(log)
    words = {w.lower() for w in stated.get("tool", ())}
    tool = next((name for name, known in _TOOL_ORDER if words & known), "")
    names = stated.get("gpu", ())
    tegra = bool(stated.get("platform")) or any(cc in integrated() for cc in ccs)
    driver = next(iter(stated.get("driver", ())), None)
    name = names[0] if names else ""
    return LogFacts(
        tool,
        _log_toolkit(log, stated),
        tuple(ccs),
        name,
        tegra,
        driver,
        stated,
        _frames(log, stated),
        _torch_cuda(stated),
    )


def _stated(log: ParsedLog) -> dict[str, tuple[str, ...]]:
    """The log's evidence values by kind, in the log's order (package names lowercased)."""
    stated: dict[str, tuple[str, ...]] = {}
    for e in log.evidence:
        if e.kind == "cuda_toolkit" and "Driver Version" in e.text:
            continue  # nvidia-smi's "CUDA Version: 12.4" beside the driver is the driver's
        value = e.value.lower() if e.kind == "package" else e.value  # "CuPy", "onnxruntime"
        stated[e.kind] = (*stated.get(e.kind, ()), value)
    return stated


def _log_toolkit(log: ParsedLog, stated: dict[str, tuple[str, ...]]) -> str | None:
    """The toolkit's CUDA version the log states: nvcc's, in words, else a report's own "CUDA
    Version" line."""
    # nvidia-smi's "CUDA Version" (beside "Driver Version") is the driver's; a report's own
    # "CUDA Version: 8.0" line is its toolkit
    said = (e.value for e in log.evidence_of("driver_cuda") if "Driver Version" not in e.text)
    return next(iter(stated.get("nvcc", ())), None) or _toolkit(stated) or next(said, None)


def _frames(log: ParsedLog, stated: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The files of the last traceback, else the site-packages files the log names (a traceback
    pasted without its header or line numbers), innermost last."""
    frames = tuple(f.file for f in log.tracebacks[-1].frames) if log.tracebacks else ()
    return frames or stated.get("site_file", ())


def _torch_cuda(stated: dict[str, tuple[str, ...]]) -> str | None:
    """The CUDA torch was built with: "CUDA used to build PyTorch: 13.0", else the local version
    of a torch wheel ("1.7.1+cu101" -> 10.1)."""
    built = next(iter(stated.get("torch_cuda", ())), None)
    if built and kb.major_minor(built):
        major, minor = kb.major_minor(built) or (0, 0)
        return f"{major}.{minor}"
    for version in stated.get("torch", ()):
        local = re.search(r"\+cu(\d{2,3})\b", version)
        if local:
            return f"{local.group(1)[:-1]}.{local.group(1)[-1]}"
    return None


def _toolkit(stated: dict[str, tuple[str, ...]]) -> str | None:
    """The toolkit's CUDA version the log states in words ("NVRTC Version: (13, 0)" -> 13.0)."""
    for value in stated.get("cuda_toolkit", ()):
        parts = kb.major_minor(value.replace(", ", "."))
        if parts:
            return f"{parts[0]}.{parts[1]}"
    return None
