"""Facts, then rules: the cause of a recognised error decided by the knowledge scan uses.

Pure. A signature recognises a message and extracts its fields (the target a compiler was asked
for, the PTX ISA versions, TensorRT's SM); ``log_facts`` adds what the rest of the log states:
which tool printed the error (nvcc, NVRTC, Triton's or XLA's ptxas, the driver's JIT linker,
TensorRT), the CUDA version of that tool, the GPU in any spelling (the GPU table), a Jetson, the
package whose kernels are missing. ``decide`` then applies one rule per kind of error, with the
toolkit table (targets each CUDA release adds and drops, its PTX ISA, its minimum driver), the GPU
table and TensorRT's support table: which way a gap goes (a toolkit too old for the target, or
newer than a target it dropped), and fixes for the exact GPU and the tool that failed. A rule
that lacks a fact it needs says which one (``Ruling.decide``); a rule that does not apply gives
None and the signature's own knowledge answers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from archgap.analysis.explain.causes import HOW_CC, dotted, product_cc
from archgap.analysis.explain.logparse import ParsedLog
from archgap.analysis.fixes.engine import ENV, TOOLKIT, UPGRADE, Fix, toolkit_limit
from archgap.kb import toolchain as kb
from archgap.kb.gpus import Renumbered, families, integrated, renumbered
from archgap.kb.tensorrt import tensorrt_on_jetson, tensorrt_support

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
    (TRITON, frozenset(("triton",))),
    (NVCC, frozenset(("nvcc",))),
)
# Targets whose last toolkit is older than this are taken as dropped when the log does not say
# which toolkit ran (the answer stays conditional on the toolkit's version): a toolkit that old
# is rarely the one a report runs.
LONG_DROPPED = (12, 0)
_TARGET = re.compile(r"\b(?:sm|compute)_(\d{2,3}[af]?)\b")
# Packages whose own kernels a "no kernel image" names, most specific first.
_PACKAGES = ("onnxruntime", "jaxlib", "jax", "cupy")


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
    stated: dict[str, tuple[str, ...]] = {}
    for e in log.evidence:
        value = e.value.lower() if e.kind == "package" else e.value  # "CuPy", "onnxruntime"
        stated[e.kind] = (*stated.get(e.kind, ()), value)
    words = {w.lower() for w in stated.get("tool", ())}
    tool = next((name for name, known in _TOOL_ORDER if words & known), "")
    # nvidia-smi's "CUDA Version" (beside "Driver Version") is the driver's; a report's own
    # "CUDA Version: 8.0" line is its toolkit
    said = (e.value for e in log.evidence_of("driver_cuda") if "Driver Version" not in e.text)
    toolkit = next(iter(stated.get("nvcc", ())), None) or _toolkit(stated) or next(said, None)
    names = stated.get("gpu", ())
    tegra = bool(stated.get("platform")) or any(cc in integrated() for cc in ccs)
    driver = next(iter(stated.get("driver", ())), None)
    # the files of the last traceback, else the site-packages files the log names (a traceback
    # pasted without its header or line numbers), innermost last
    frames = tuple(f.file for f in log.tracebacks[-1].frames) if log.tracebacks else ()
    frames = frames or stated.get("site_file", ())
    name = names[0] if names else ""
    return LogFacts(
        tool, toolkit, tuple(ccs), name, tegra, driver, stated, frames, _torch_cuda(stated)
    )


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


def decide(signature_id: str, error: str, facts: LogFacts) -> Ruling | None:
    """The ruling for a recognised error (``error``: its message), or None when no rule here
    applies to it."""
    if signature_id in (
        "nvcc-unsupported-gpu-arch",
        "ptxas-unknown-gpu-name",
        "nvrtc-invalid-arch",
    ):
        return _toolkit_target(error, facts)
    if signature_id in ("ptxas-unsupported-ptx-version", "cuda-unsupported-ptx-toolchain"):
        return _ptx_isa(facts)
    if signature_id == "xla-ptxas-too-old":
        return _toolkit_target(error, facts, tool=XLA)
    if signature_id == "tensorrt-unsupported-sm":
        return _tensorrt(facts)
    if signature_id in (
        "torch-sm-not-compatible",
        "torch-found-gpu-capability",
        "torch-supported-archs",
    ):
        return _torch_archs(facts)
    if signature_id == "cuda-no-kernel-image":
        return _no_kernel_image(facts)
    if signature_id == "cuda-device-kernel-image-invalid" and "cupy" in facts.stated.get(
        "package", ()
    ):
        return _cupy_compiles(facts) if len(facts.ccs) == 1 else None
    if signature_id == "capability-gate":
        return _capability_gate(error, facts)
    return None


# ---------------------------------------------------------------- toolkit targets


def _target_of(error: str, facts: LogFacts) -> str | None:
    found = _TARGET.search(error)
    if found:
        return f"sm_{found.group(1)}"
    cc = re.search(r"CC (\d{1,2}\.\d)", error)  # XLA: "ptxas does not support CC 9.0"
    if cc:
        return f"sm_{cc.group(1).replace('.', '')}"
    option = facts.first("arch_option")  # NVRTC's options: -arch=compute_61
    if option:
        return f"sm_{option}"
    return f"sm_{facts.ccs[0].replace('.', '')}" if len(facts.ccs) == 1 else None


def _toolkit_target(error: str, facts: LogFacts, tool: str = "") -> Ruling | None:
    """A compiler rejected a target: the toolkit predates it, or is newer than a release that
    dropped it (kb/toolkits.json's targets per release). Triton's ptxas is the signature's."""
    tool = tool or facts.tool or PTXAS
    target = _target_of(error, facts)
    span = kb.toolkit_range_for(target.rstrip("af")) if target else None
    if target is None and tool == NVRTC:
        return _nvrtc_without_gpu(facts)
    if tool == TRITON or target is None or span is None:
        return None
    first, last = span
    have = _nvrtc_cuda(facts) if tool == NVRTC else facts.toolkit if tool in (NVCC, PTXAS) else None
    dropped, needs = _dropped_words(target, last), f"{target} needs CUDA >= {first}"
    if have and last and _version(have) > _version(last):
        cause, status, newer = f"{tool} is CUDA {have}, newer than {target}: {dropped}", True, True
    elif have and _version(have) < _version(first):
        cause, status, newer = f"{tool} is CUDA {have}, older than {target}: {needs}", True, False
    elif tool == PTXAS and (stack := have or facts.torch_cuda) and _builds(stack, target):
        # the CUDA the log states (its toolkit, or torch's build) builds the target, yet a ptxas
        # rejected it: the ptxas that ran is another one (a bundled one such as Triton's, or an
        # older toolkit's on PATH)
        return _other_ptxas(target, stack, facts)
    elif tool == NVCC and have and _builds(have, target):
        return _other_nvcc(target, have, first, last, facts)
    elif last and _version(last) < LONG_DROPPED:
        # a target no toolkit of the last years builds: the one in use most likely dropped it
        cause, status, newer = f"{dropped}; the {tool} in use is newer than that", False, True
    elif last:  # a toolkit too old or too new both reject it: the toolkit's version decides
        newer_fixes = _target_fixes(tool, target, first, last, True, facts)
        older_fixes = _target_fixes(tool, target, first, last, False, facts)[-1:]
        cases = (
            Case(f"if {tool} is CUDA > {last}", f"{dropped}; the {tool} is newer", newer_fixes),
            Case(
                f"if {tool} is CUDA < {first}",
                f"the {tool} predates {target}: {needs}",
                older_fixes,
            ),
        )
        cause = (
            f"{tool} is either newer than the last release that builds {target} or older than "
            f"the first"
        )
        decide = (f"the CUDA version of {tool}: `nvcc --version` (or the package's CUDA build)",)
        return Ruling(
            "toolkit-target",
            f"{cause}{_gpu_words(facts)}",
            CONDITIONAL,
            newer_fixes + older_fixes,
            decide,
            cases,
        )
    else:
        cause, status, newer = f"the {tool} in use predates {target}: {needs}", False, False
    fixes = _target_fixes(tool, target, first, last, newer, facts)
    found = _renumbered(target)
    if found:  # Thor: sm_101 up to CUDA 12.9, sm_110 from 13.0
        cause += f" (CUDA {found[0].toolkit} renumbered sm_{found[0].old.replace('.', '')} as "
        cause += f"sm_{found[0].new.replace('.', '')}: the same GPU)"
    if status:
        return Ruling("toolkit-target", f"{cause}{_gpu_words(facts)}", DETERMINED, fixes)
    decide = (f"the CUDA version of {tool}: `nvcc --version` (or the package's CUDA build)",)
    return Ruling("toolkit-target", f"{cause}{_gpu_words(facts)}", CONDITIONAL, fixes, decide)


def _renumbered(target: str) -> tuple[Renumbered, bool] | None:
    """The renumbering a target is part of (kb/gpus.json: Thor's sm_101 is sm_110 from CUDA
    13.0), and whether the target is the old number."""
    plain = target.rstrip("af")
    for r in renumbered():
        if plain in (f"sm_{r.old.replace('.', '')}", f"sm_{r.new.replace('.', '')}"):
            return r, plain == f"sm_{r.old.replace('.', '')}"
    return None


def _renumbered_fixes(target: str, newer: bool) -> tuple[Fix, ...]:
    """A dropped old number is the same GPU under its new number, and the reverse."""
    found = _renumbered(target)
    if found is None:
        return ()
    r, is_old = found
    old, new = f"sm_{r.old.replace('.', '')}", f"sm_{r.new.replace('.', '')}"
    if newer and is_old:
        return (
            Fix(
                f"build for {new} instead of {old} (CMAKE_CUDA_ARCHITECTURES="
                f'{new.removeprefix("sm_")}, TORCH_CUDA_ARCH_LIST="{r.new}"): CUDA {r.toolkit} '
                f"renumbered {old} as {new}, the same GPU",
                r.source,
                kind=ENV,
            ),
        )
    if not newer and not is_old:
        return (
            Fix(
                f"with a CUDA older than {r.toolkit}, build for {old} instead: the same GPU's "
                f"number there",
                r.source,
                kind=ENV,
            ),
        )
    return ()


# The packages that compile with an NVRTC of their own choosing (the system's, or a wheel's).
_NVRTC_USERS = frozenset(("cupy", "numba", "numba-cuda", "jax", "cuda-python", "warp-lang"))


def _nvrtc_cuda(facts: LogFacts) -> str | None:
    """The CUDA of the NVRTC that ran: where torch is the only NVRTC user the log names, its
    build's (a torch wheel loads the NVRTC of its own CUDA, nvidia-cuda-nvrtc-cuXX or bundled,
    whatever toolkit the system has), else the toolkit the log states."""
    others = _NVRTC_USERS & set(facts.stated.get("package", ()))
    return facts.torch_cuda if facts.torch_cuda and not others else facts.toolkit


def _nvrtc_without_gpu(facts: LogFacts) -> Ruling:
    """NVRTC rejected an -arch the log does not show, for a GPU it does not name: the answer
    depends on the GPU, against the targets of the NVRTC's CUDA."""
    have = _nvrtc_cuda(facts)
    targets = sorted(kb.targets_of(have) or () if have else (), key=_number)
    plain = [t for t in targets if t[-1].isdigit()]
    fix = Fix(
        f"use the package's build for a CUDA whose NVRTC targets the GPU (check the GPU with "
        f"{HOW_CC})",
        "the package compiles at run time with the NVRTC of its CUDA",
        kind=TOOLKIT,
    )
    decide = (f"the GPU's compute capability: {HOW_CC}",)
    if have and plain:
        cause = f"the NVRTC of CUDA {have} rejected the GPU's architecture"
        oldest, newest = plain[0], plain[-1]
        # a GPU older than what this CUDA builds: the last CUDA that built the target below
        below = max(
            (t for t in _every_target() if _number(t) < _number(oldest)), key=_number, default=""
        )
        last = (kb.last_toolkit_for(below) if below else None) or "an older"
        cases = (
            Case(
                f"if the GPU is older than {oldest}",
                f"CUDA {have} no longer builds it (a newer CUDA dropped it)",
                (_nvrtc_fix(True, below or oldest, last, None),),
            ),
            Case(
                f"if the GPU is newer than {newest}",
                f"CUDA {have} predates it: it needs a newer CUDA",
                (_nvrtc_fix(False, newest, None, _after(have)),),
            ),
        )
        return Ruling("toolkit-target", cause, CONDITIONAL, (fix,), decide, cases)
    cause = (
        "NVRTC rejected the GPU's architecture: its CUDA is either older than the GPU or "
        "newer than a release that dropped it"
    )
    return Ruling("toolkit-target", cause, CONDITIONAL, (fix,), decide)


def _number(target: str) -> int:
    return int(re.sub(r"\D", "", target))


def _every_target() -> frozenset[str]:
    """Every plain ``sm_*`` target a known toolkit release ever built."""
    return frozenset(t for r in kb.toolkit_releases() for t in r.targets_added if t[-1].isdigit())


def _nvrtc_fix(newer: bool, target: str, last: str | None, first: str | None) -> Fix:
    """The NVRTC to use: the last CUDA that builds a dropped target, or one new enough."""
    if newer:
        return Fix(
            f"use the CUDA {last} NVRTC for this GPU (e.g. {_cupy_package(last)} with a CUDA "
            f"{last} runtime); a newer CUDA cannot build {target}",
            "the package compiles at run time with the NVRTC of its CUDA",
            kind=TOOLKIT,
        )
    return Fix(
        f"use an NVRTC from CUDA >= {first} (the package's build for that CUDA, e.g. "
        f"{_cupy_package(first)})",
        "the package compiles at run time with the NVRTC of its CUDA",
        kind=TOOLKIT,
    )


def _cupy_package(cuda: str | None) -> str:
    """CuPy's wheel for a CUDA: one per minor before CUDA 11 (cupy-cuda102), then one per major
    (cupy-cuda11x, cupy-cuda12x): https://docs.cupy.dev/en/stable/install.html"""
    major = _major(cuda)
    return f"cupy-cuda{major}x" if major >= 11 else f"cupy-cuda{(cuda or '').replace('.', '')}"


def _other_ptxas(target: str, have: str, facts: LogFacts) -> Ruling:
    """A ptxas rejected a target that the log's own CUDA builds: that ptxas is not the CUDA's."""
    cause = (
        f"the log's CUDA {have} builds {target}, so the ptxas that rejected it is another, "
        f"older one: a ptxas a package bundles (Triton's, in a torch or vLLM process) or an "
        f"older toolkit's first on PATH"
    )
    fixes = (
        Fix(
            f"export TRITON_PTXAS_PATH to the ptxas of CUDA {have} (e.g. "
            f"/usr/local/cuda-{have}/bin/ptxas; Triton runs its bundled ptxas unless told), and "
            f"clear ~/.triton/cache",
            "Triton's bundled ptxas is older than the toolkit",
            kind=ENV,
        ),
        Fix(
            f"put the CUDA {have} bin directory first on PATH (CUDA_HOME too) for other tools "
            f"that run the first ptxas they find",
            "",
            kind=ENV,
        ),
    )
    return Ruling("toolkit-target", f"{cause}{_gpu_words(facts)}", DETERMINED, fixes)


def _other_nvcc(target: str, have: str, first: str, last: str | None, facts: LogFacts) -> Ruling:
    """nvcc rejected a target that the CUDA the log names builds: the nvcc that ran is another
    toolkit's (an older one on PATH, such as a distribution's /usr/bin/nvcc, or one past the
    release that dropped the target), not the one the report installed."""
    outside = f"CUDA < {first}" + (f" or > {last}" if last else "")
    cause = (
        f"the log's CUDA {have} builds {target}, so the nvcc that ran is another toolkit's "
        f"({outside}): one found first on PATH or through CUDA_HOME, not CUDA {have}"
    )
    fixes = (
        Fix(
            f"put the CUDA {have} nvcc first: PATH=/usr/local/cuda-{have}/bin:$PATH and "
            f"CUDA_HOME=/usr/local/cuda-{have} (check with `which -a nvcc` and `nvcc --version`)",
            f"CUDA {have} builds {target}",
            kind=ENV,
        ),
        Fix(
            "or remove the other toolkit the build finds first (a distribution's "
            "nvidia-cuda-toolkit in /usr/bin, an older /usr/local/cuda link)",
            "",
            kind=TOOLKIT,
        ),
    )
    return Ruling("toolkit-target", f"{cause}{_gpu_words(facts)}", DETERMINED, fixes)


def _builds(cuda: str, target: str) -> bool:
    span = kb.toolkit_range_for(target.rstrip("af"))
    return span is not None and _version(span[0]) <= _version(cuda) <= _version(span[1] or cuda)


def _version(text: str) -> tuple[int, int]:
    return kb.major_minor(text) or (0, 0)


def _dropped_words(target: str, last: str | None) -> str:
    if last is None:
        return ""
    return f"CUDA {_after(last)} dropped {target} (the last toolkit that builds it is {last})"


def _target_fixes(
    tool: str, target: str, first: str, last: str | None, newer: bool, facts: LogFacts
) -> tuple[Fix, ...]:
    gpu_target = f"sm_{facts.ccs[0].replace('.', '')}" if len(facts.ccs) == 1 else None
    not_the_gpu = gpu_target is not None and gpu_target != target.rstrip("af")
    fixes: list[Fix] = list(_renumbered_fixes(target, newer))
    if tool == XLA:
        need = toolkit_limit(gpu_target or target) or f"CUDA >= {first}"
        fixes.append(
            Fix(
                f"put a ptxas from {need} first on PATH for XLA (jax: pip install "
                f"'nvidia-cuda-nvcc-cu12'; TensorFlow: the CUDA its release names)",
                "XLA runs the ptxas it finds on PATH or in its CUDA directory; Triton's settings "
                "do not apply",
                kind=TOOLKIT,
            )
        )
        return tuple(fixes)
    if tool == NVRTC:
        return (_nvrtc_fix(newer, target, last, first),)
    if not_the_gpu and gpu_target:
        cc = facts.ccs[0]
        fixes.append(
            Fix(
                f"build for the GPU itself: leave {target} out of the arch list and build "
                f"{gpu_target} (CMAKE_CUDA_ARCHITECTURES={cc.replace('.', '')}, "
                f'TORCH_CUDA_ARCH_LIST="{cc}", -gencode arch=compute_{cc.replace(".", "")},'
                f"code={gpu_target})",
                f"the {facts.gpu_name or 'GPU'} is {cc}; {target} is not needed for it",
                kind=ENV,
            )
        )
    elif newer:
        fixes.append(
            Fix(
                f"remove {target} from the build's arch list (-gencode, CMAKE_CUDA_ARCHITECTURES, "
                f"TORCH_CUDA_ARCH_LIST)",
                "the toolkit in use no longer builds it",
                kind=ENV,
            )
        )
    if newer:
        fixes.append(
            Fix(
                f"or build with CUDA <= {last} (the last toolkit that builds {target})",
                "an older toolkit, only if that GPU must be supported",
                kind=TOOLKIT,
            )
        )
    else:
        fixes.append(
            Fix(
                f"build with CUDA >= {first} (point CUDA_HOME and PATH at it)",
                f"the first toolkit that builds {target}",
                kind=TOOLKIT,
            )
        )
    return tuple(fixes)


# ---------------------------------------------------------------- PTX ISA


def _cuda_of_isa(isa: str) -> kb.ToolkitRelease | None:
    """The first toolkit release whose PTX ISA is at least ``isa``."""
    wanted = _version(isa)
    return next((r for r in kb.toolkit_releases() if _version(r.ptx_isa) >= wanted), None)


def _ptx_isa(facts: LogFacts) -> Ruling | None:
    """PTX newer than what assembles it: the driver's JIT linker (a driver older than the
    toolchain that wrote the PTX), or a ptxas older than it (the tool's own fix)."""
    needed, known = facts.first("ptx_isa_needed"), facts.first("ptx_isa_known")
    found = needed and known
    writer = _cuda_of_isa(needed) if needed else None
    reader = _cuda_of_isa(known) if known else None
    through_driver = facts.tool in (DRIVER, "") or found is None
    if not through_driver:
        if facts.tool == TRITON or writer is None:
            return None  # Triton's ptxas: the signature's fixes (TRITON_PTXAS_PATH)
        cause = (
            f"{facts.tool} knows PTX ISA {known} (CUDA {reader.cuda if reader else '?'}) but the "
            f"PTX is ISA {needed} (CUDA {writer.cuda}): the ptxas in use is older than the "
            f"toolchain that wrote the PTX"
        )
        where = "first on PATH" if facts.tool in (XLA, PTXAS) else "in CUDA_HOME / PATH"
        fix = Fix(
            f"put a ptxas from CUDA >= {writer.cuda} {where}",
            f"{facts.tool} assembles the PTX; it must know ISA {needed}",
            kind=TOOLKIT,
        )
        return Ruling("ptx-isa", cause, DETERMINED, (fix,))
    newest: kb.ToolkitRelease | None = writer
    if writer is not None:
        cause = (
            f"the driver's JIT knows PTX ISA {known} (a CUDA {reader.cuda if reader else '?'} "
            f"driver) but the PTX is ISA {needed}, written by a CUDA {writer.cuda} toolchain: the "
            f"driver is older than that toolchain"
        )
        status = DETERMINED
    else:
        have = facts.toolkit
        newest = kb.toolkit_release(have) if have else None
        runs = kb.driver_cuda_version(facts.driver) if facts.driver else None
        said = f" (CUDA {have})" if have else ""
        drv = f"; driver {facts.driver} runs up to CUDA {runs}" if runs else ""
        cause = (
            f"the driver is older than the toolchain that built the PTX{said}{drv}: the driver "
            f"cannot JIT-compile a PTX ISA newer than its own CUDA"
        )
        status = DETERMINED if have or runs else CONDITIONAL
    return Ruling(
        "ptx-isa",
        cause,
        status,
        _driver_fixes(newest, reader, facts),
        ()
        if status == DETERMINED
        else ("the driver's CUDA version and the toolkit's: `nvidia-smi`, `nvcc --version`",),
    )


def _driver_fixes(
    newest: kb.ToolkitRelease | None, reader: kb.ToolkitRelease | None, facts: LogFacts
) -> tuple[Fix, ...]:
    if facts.tegra:
        return (
            Fix(
                "build with the CUDA of the board's JetPack (or flash a newer JetPack): on "
                "Jetson the driver comes with JetPack, desktop drivers and wheels do not apply",
                "the JetPack release fixes the driver's CUDA",
                kind=TOOLKIT,
            ),
        )
    need = (
        f" >= {newest.min_driver_linux} (CUDA {newest.cuda})"
        if newest and newest.min_driver_linux
        else " whose CUDA version is at least the toolkit's"
    )
    match = f"CUDA {reader.cuda}" if reader else "the driver's CUDA version (nvidia-smi)"
    return (
        Fix(
            f"upgrade the NVIDIA driver to one{need}",
            "the driver then JIT-compiles the PTX",
            kind=UPGRADE,
        ),
        Fix(
            f"or produce the PTX with a toolkit matching the driver: {match} (a container or a "
            "cudatoolkit / nvidia-cuda-nvcc of that version for numba, CuPy, candle)",
            "keeps the driver",
            kind=TOOLKIT,
        ),
    )


# ---------------------------------------------------------------- TensorRT


_TRT_VERSION_HOW = (
    "the TensorRT version: `python -c 'import tensorrt; print(tensorrt.__version__)'` "
    "(or `dpkg -l | grep nvinfer`)"
)


def _tensorrt(facts: LogFacts) -> Ruling | None:
    """TensorRT's SM gate against kb/tensorrt.json: the release predates the GPU, or dropped it."""
    cc = _trt_cc(facts)
    if cc is None:
        return None
    version = _trt_version(facts)
    known = tensorrt_support().get(cc)
    gpu = _gpu_words(facts)
    said = f"TensorRT {version}" if version else "this TensorRT"
    if known is None:
        fix = Fix(f"a TensorRT release whose support matrix lists SM {cc}", "", kind=UPGRADE)
        why = "which TensorRT releases support the GPU: the TensorRT support matrix"
        cause = f"{said} does not build engines for SM {cc}{gpu}"
        return Ruling("tensorrt-sm", cause, CONDITIONAL, (fix,), (why,))
    have = kb.major_minor(version) if version else None
    last = kb.major_minor(known.last) if known.last else None
    dropped = (have and last and have > last) or (not have and last and not known.first)
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


# ---------------------------------------------------------------- torch's arch list


def _torch_archs(facts: LogFacts) -> Ruling | None:
    """torch's capability warning against its own arch list: SASS of X.Y runs on X.Z (Z >= Y)
    of a desktop GPU, so a newer minor of a built major is no gap; older or newer majors are."""
    listed = facts.first("torch_archs")
    low, high = facts.first("torch_cc_min"), facts.first("torch_cc_max")
    archs = [dotted(a) for a in listed.split() if a.startswith("sm_")] if listed else [low, high]
    built = sorted({parts for a in archs if a and (parts := kb.major_minor(a))})
    cc = kb.major_minor(facts.ccs[0]) if len(facts.ccs) == 1 else None
    if cc is None:
        return None
    if not built:
        return _torch_cuda_build(cc, facts)
    gpu, name, dot = _gpu_words(facts), f"sm_{cc[0]}{cc[1]}", f"{cc[0]}.{cc[1]}"
    runs = [b for b in built if b[0] == cc[0] and b[1] <= cc[1]]
    if runs and not facts.tegra:
        best = max(runs)
        cause = (
            f"no gap: this torch has sm_{best[0]}{best[1]} SASS, which runs on {dot} (same major, "
            f"newer minor){gpu}; the warning compares the arch list literally, so it is harmless"
        )
        return Ruling("torch-arch-list", cause, DETERMINED, ())
    oldest, newest = built[0], built[-1]
    if cc < oldest:
        last = kb.last_toolkit_for(name) or "the last toolkit that builds it"
        cause = (
            f"the GPU ({dot}){gpu} is older than the oldest architecture this torch was built "
            f"for (sm_{oldest[0]}{oldest[1]})"
        )
        fix = Fix(
            f"an older torch built with CUDA <= {last} that still ships {name}, or torch built "
            f'from source with TORCH_CUDA_ARCH_LIST="{dot}"',
            "current torch wheels no longer carry it",
            kind=UPGRADE,
        )
        return Ruling("torch-arch-list", cause, DETERMINED, (fix,))
    first = kb.first_toolkit_for(name)
    if first is None:
        return None
    index = f"cu{first.replace('.', '')}"
    cause = (
        f"this torch was built for up to sm_{newest[0]}{newest[1]}, nothing of which runs on "
        f"{dot}{gpu}: {name} needs a torch built with CUDA >= {first}"
    )
    fix = Fix(
        f"install a torch built with CUDA >= {first} (the {index} index or a newer one: "
        f"https://download.pytorch.org/whl/{index})",
        "a torch release that has wheels for that CUDA",
        kind=UPGRADE,
    )
    return Ruling("torch-arch-list", cause, DETERMINED, (fix,))


def _torch_cuda_build(cc: tuple[int, int], facts: LogFacts) -> Ruling | None:
    """torch's warning without its arch list: the CUDA torch was built with against the GPU's
    target (a CUDA older than the target cannot have built it; one newer than a release that
    dropped it did not), else the arch list decides."""
    name, dot, gpu = f"sm_{cc[0]}{cc[1]}", f"{cc[0]}.{cc[1]}", _gpu_words(facts)
    span = kb.toolkit_range_for(name)
    built = facts.torch_cuda
    how = "torch's arch list: `python -c 'import torch; print(torch.cuda.get_arch_list())'`"
    if span is None:
        return None
    first, last = span
    index = f"cu{first.replace('.', '')}"
    newer = Fix(
        f"install a torch built with CUDA >= {first} (the {index} index or a newer one: "
        f"https://download.pytorch.org/whl/{index})",
        "a torch release that has wheels for that CUDA",
        kind=UPGRADE,
    )
    older = Fix(
        f"an older torch built with CUDA <= {last} that still ships {name}, or torch built "
        f'from source with TORCH_CUDA_ARCH_LIST="{dot}"',
        "current torch wheels no longer carry it",
        kind=UPGRADE,
    )
    if built and _version(built) < _version(first):
        cause = (
            f"this torch was built with CUDA {built}, older than {name}{gpu}: {name} needs "
            f"CUDA >= {first}"
        )
        return Ruling("torch-arch-list", cause, DETERMINED, (newer,))
    if built and last and _version(built) > _version(last):
        cause = (
            f"this torch was built with CUDA {built}{gpu}, and {_dropped_words(name, last)}: "
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


# ---------------------------------------------------------------- no kernel image


def _no_kernel_image(facts: LogFacts) -> Ruling | None:
    """A kernel with no image for the GPU: a Jetson needs its own builds, an old GPU current
    builds dropped needs an old release, any other GPU a build of that package with its SASS."""
    package = next((p for p in _PACKAGES if p in facts.stated.get("package", ())), None)
    what = package or "the failing package"
    if facts.tegra:
        return _jetson_build(what, facts)
    if len(facts.ccs) > 1:
        return _each_gpu("no-kernel-image", _no_kernel_image, facts)
    if len(facts.ccs) != 1:
        return None
    if package == "cupy":
        return _cupy_compiles(facts)
    cc = facts.ccs[0]
    sm = cc.replace(".", "")
    gpu = _gpu_words(facts)
    last = kb.last_toolkit_for(f"sm_{sm}")
    if last is not None and (kb.major_minor(cc) or (0, 0)) < (5, 0):
        return Ruling(
            "no-kernel-image",
            f"{what} no longer ships sm_{sm}{gpu}: CUDA {_after(last)} dropped it (the last "
            f"toolkit that builds it is {last}), so current builds leave it out",
            DETERMINED,
            (
                Fix(
                    f"an older release of {what} built with CUDA <= {last} that still ships "
                    f"sm_{sm}, or build {what} from source for {cc} with CUDA <= {last}",
                    "newer releases will not support this GPU again",
                    kind=UPGRADE,
                ),
            ),
        )
    runs = _sass_that_runs(cc)
    first = kb.first_toolkit_for(runs[0])
    also = (
        f" (or {', '.join(runs[:-1])}: plain SASS of an older minor runs on {cc})"
        if len(runs) > 1
        else ""
    )
    fixes = [
        Fix(
            f"install a build of {what} that contains sm_{sm}{also}, built with CUDA >= {first}; "
            f"check with `archgap scan --gpu {cc}`",
            "an arch-specific build (sm_XYa) of another GPU does not run on it",
            kind=UPGRADE,
        ),
        Fix(
            f"when you build {what} yourself: rebuild it for {cc} (CMAKE_CUDA_ARCHITECTURES={sm}, "
            f'TORCH_CUDA_ARCH_LIST="{cc}")',
            "",
            kind=ENV,
        ),
    ]
    return Ruling(
        "no-kernel-image",
        f"{what} was built without sm_{sm}{gpu}",
        DETERMINED if package else CONDITIONAL,
        tuple(fixes),
        () if package else ("which package's kernel failed: the traceback's frames",),
    )


def _sass_that_runs(cc: str) -> list[str]:
    """The plain SASS targets a desktop GPU runs, oldest first: sm_XY for X.Z with Z >= Y, within
    its major (12.1 runs sm_120 and sm_121), among the targets some toolkit builds."""
    major, minor = kb.major_minor(cc) or (0, 0)
    own = [f"sm_{major}{m}" for m in range(minor + 1)]
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


def _cupy_compiles(facts: LogFacts) -> Ruling | None:
    """CuPy compiles its kernels at run time with NVRTC (cupy/cuda/compiler.py) and loads them
    through the driver: a kernel with no image for the GPU (CUDA_ERROR_NO_BINARY_FOR_GPU,
    'device kernel image is invalid') means the NVRTC of its CUDA, or the CuPy that picks the
    target, predates the GPU."""
    cc = facts.ccs[0]
    target = f"sm_{cc.replace('.', '')}"
    first = kb.first_toolkit_for(target)
    if first is None:
        return None
    have = facts.toolkit
    if have and _version(have) >= _version(first):
        why = f"the NVRTC of CUDA {have} builds it, so the CuPy release predates {cc}"
    else:
        why = f"{target} needs an NVRTC from CUDA >= {first} and a CuPy release that knows {cc}"
    cause = (
        f"CuPy compiles its kernels at run time with NVRTC, and the kernel it loaded has no "
        f"image for {target}{_gpu_words(facts)}: {why}"
    )
    fix = Fix(
        f"use a CuPy release that supports compute capability {cc} (its compatibility matrix) "
        f"built for CUDA >= {first} (cupy-cuda{max(_major(first), 11)}x, with "
        f"nvidia-cuda-nvrtc of that CUDA), and clear ~/.cupy/kernel_cache",
        "CuPy compiles with the NVRTC of its CUDA; a kernel cache built before stays stale",
        kind=UPGRADE,
    )
    return Ruling("nvrtc-target", cause, DETERMINED, (fix,))


def _jetson_build(what: str, facts: LogFacts) -> Ruling:
    cc = facts.ccs[0] if len(facts.ccs) == 1 else None
    arch = f"sm_{cc.replace('.', '')}" if cc else "the board's architecture"
    build = (
        f'TORCH_CUDA_ARCH_LIST="{cc}", CMAKE_CUDA_ARCHITECTURES={cc.replace(".", "")}'
        if cc
        else "the board's compute capability (Orin 8.7, Xavier 7.2, Thor 11.0)"
    )
    return Ruling(
        "no-kernel-image",
        f"{what} has no kernels for {arch}{_gpu_words(facts)}: a Jetson needs builds made for "
        "its own architecture (Tegra binaries do not run desktop SASS, and desktop or server "
        "aarch64 wheels leave Jetson out)",
        DETERMINED,
        (
            Fix(
                f"install the JetPack build of {what} (NVIDIA's Jetson wheels or containers for "
                "the board's JetPack), not a desktop or server index",
                "Jetson builds carry the board's architecture",
                kind=UPGRADE,
            ),
            Fix(
                f"or build {what} on the board for {build}", "a long build on the device", kind=ENV
            ),
        ),
    )


# ---------------------------------------------------------------- a package's own gate

_ONLY_ON = re.compile(r"only support(?:ed on SM ?|s sm_?)(\d{2,3})\b", re.IGNORECASE)
_NEEDS = re.compile(r"compute capability (==|>=) (\d{1,2}\.\d)")


def _capability_gate(error: str, facts: LogFacts) -> Ruling | None:
    """A package's check on the compute capability, settled by the GPU: a kernel written for
    other architectures only (no rebuild adds it), or a table that does not list the GPU."""
    if len(facts.ccs) != 1:
        return None
    cc, gpu = facts.ccs[0], _gpu_words(facts)
    package, module = raiser(facts.frames)
    package = package or next(iter(facts.stated.get("package", ())), "")
    who = f"{package} ({module})" if module else package or "the package"
    only, needs = _ONLY_ON.search(error), _NEEDS.search(error)
    wanted = (
        dotted(only.group(1))
        if only
        else needs.group(2)
        if needs and needs.group(1) == "=="
        else None
    )
    family = next((f for f in families() if cc in f and wanted in f), None) if wanted else None
    if wanted and wanted != cc and family and _version(wanted) < _version(cc):
        return _family_gate(who, package, wanted, cc, facts)
    if wanted and wanted != cc:
        cause = (
            f"{who} has this kernel for {wanted} only{gpu}: it was written for that "
            f"architecture, so rebuilding for {cc} does not add it"
        )
    elif needs and needs.group(1) == ">=" and _version(cc) < _version(needs.group(2)):
        cause = f"{who} needs compute capability >= {needs.group(2)}; the GPU is older{gpu}"
    else:
        cause = f"{who}'s check does not accept {cc}{gpu}: its table of capabilities lacks it"
    fixes = (
        Fix(
            f"run {package or 'it'} without the feature whose check failed"
            + (f" (the one {module} serves)" if module else "")
            + ", or with another backend for it",
            "the check, not the GPU, decides",
            kind=ENV,
        ),
        Fix(
            f"a {package or 'package'} release that implements it for {cc}, if one exists",
            "check the project's release notes for the GPU",
            kind=UPGRADE,
        ),
    )
    return Ruling("capability-gate", cause, DETERMINED, fixes)


def _family_gate(who: str, package: str, wanted: str, cc: str, facts: LogFacts) -> Ruling:
    """A check for one member of an architecture family on a newer member (sm_120 only, on a
    GB10's 12.1): plain and family SASS of the older member runs on the newer one, so a literal
    check may be too strict; arch-specific SASS (sm_120a) runs on exactly its own capability.
    Which SASS the kernel is decides."""
    sm, own = wanted.replace(".", ""), cc.replace(".", "")
    name = package or "the package"
    cases = (
        Case(
            f"if the kernel is plain or family SASS (sm_{sm}, sm_{sm}f)",
            f"it runs on {cc} too (same family, newer minor): {who}'s check compares the "
            f"capability literally",
            (
                Fix(
                    f"a release of {name} whose check accepts {cc} with the same kernels (or "
                    f"the check widened to the family, as its maintainers decide)",
                    "no rebuild is needed for the kernel itself",
                    kind=UPGRADE,
                ),
            ),
        ),
        Case(
            f"if the kernel is arch-specific SASS (sm_{sm}a)",
            f"it runs on {wanted} only: {cc} needs kernels built for sm_{own}a or sm_{sm}f",
            (
                Fix(
                    f"run {name} without the feature whose check failed, or with another "
                    f"backend for it, until it ships {cc} kernels",
                    "the check, not the GPU, decides",
                    kind=ENV,
                ),
            ),
        ),
    )
    cause = f"{who} accepts {wanted} only{_gpu_words(facts)}, a member of the same family"
    decide = (
        f"which SASS {name} ships for the kernel: `archgap scan --gpu {cc}` (or cuobjdump "
        f"--list-elf on its library)",
    )
    fixes = tuple(f for c in cases for f in c.fixes)
    return Ruling("capability-gate", cause, CONDITIONAL, fixes, decide, cases)


def raiser(frames: Sequence[str]) -> tuple[str, str]:
    """(package, module) of the innermost frame in site-packages: ("sglang", "pdmux_context")."""
    for file in reversed(frames):
        path = file.replace("\\", "/")
        if "-packages/" in path:
            parts = path.split("-packages/", 1)[1].split("/")
            return parts[0], parts[-1].removesuffix(".py") if len(parts) > 1 else ""
    return "", ""


# ---------------------------------------------------------------- words


def _gpu_words(facts: LogFacts) -> str:
    """ " (the GPU: GeForce RTX 5090, 12.0)" for the cause's wording; "" with no single GPU."""
    if len(facts.ccs) != 1:
        return ""
    named = f"{facts.gpu_name}, " if facts.gpu_name else ""
    return f" (the GPU: {named}{facts.ccs[0]})"


def _after(cuda: str) -> str:
    releases = [r.cuda for r in kb.toolkit_releases()]
    return releases[releases.index(cuda) + 1] if cuda in releases[:-1] else "a later release"


def _major(cuda: str | None) -> int:
    parts = kb.major_minor(cuda or "")
    return parts[0] if parts else 0
