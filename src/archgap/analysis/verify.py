"""Ground truth against the prediction: what the CUDA driver loaded vs the scan's verdicts. Pure.

``load_plan`` says which images the probe's "verify" section should offer the driver (the
entries the scan's verdicts count); ``compare`` puts the section's answer beside the scan's
library verdicts for the same GPU (``verdicts_for``, the scan's own analysis with the scan's
driver PTX rule) and turns every disagreement into a ready-to-file report of a bug in archgap's
rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from archgap.analysis.verdicts.compat import ComputeCapability, GpuTarget
from archgap.analysis.verdicts.verdicts import (
    UNKNOWN,
    UNOWNED,
    LibraryVerdict,
    PackageBinaries,
    group_by_package,
    verdicts_for,
)
from archgap.kb.toolchain import major_minor, max_ptx_isa_for_driver, toolkit_release
from archgap.probe.binary.deep_plan import runtime_entries
from archgap.probe.environment.gpu import cuda_version_text
from archgap.probe.facts import BinaryFacts, PythonEnvironment


@dataclass(frozen=True)
class Attempt:
    """One image offered to the driver."""

    image: str  # "sm_90 SASS in .nv_fatbin at 0x2640"
    ok: bool
    error: str | None  # the driver's error name: CUDA_ERROR_NO_BINARY_FOR_GPU
    error_text: str | None  # cuGetErrorString
    error_log: str  # CU_JIT_ERROR_LOG_BUFFER
    info_log: str  # CU_JIT_INFO_LOG_BUFFER
    seconds: float


@dataclass(frozen=True)
class Check:
    """One library on one GPU: the scan's verdict and what the driver did."""

    path: str
    package: str
    version: str
    gpu_index: int
    predicted: str  # the scan's library verdict: native, jit, none, unknown
    prediction: str  # its reason
    deciding_entry: str | None
    observed: str  # native (SASS loaded), jit (PTX JIT-compiled), none, unknown (not settled)
    observation: str
    target: str | None  # the targets that loaded ("sm_103f, sm_100")
    images: int  # fatbin containers (or bare cubins) offered
    loaded: int  # containers from which the driver loaded an image
    empty: int  # containers with nothing this GPU takes (a device-link stub on a newer GPU)
    functions: int | None  # cuModuleGetFunctionCount over the loaded images
    seconds: float  # load wall time of the loaded images
    jit_ms: float | None  # the driver's own JIT wall time (CU_JIT_WALL_TIME), PTX only
    attempts: tuple[Attempt, ...]  # images the driver refused (one per target)
    failures: tuple[Attempt, ...]  # images that failed otherwise (a corrupt image, a JIT error)

    @property
    def settled(self) -> bool:
        # A kernel-less file (an nvlink stub, verdict no-kernels) has no kernel to compare.
        return UNKNOWN not in (self.predicted, self.observed) and self.predicted != "no-kernels"

    @property
    def agrees(self) -> bool:
        return self.predicted == self.observed

    @property
    def load_failure(self) -> bool:
        """Nothing (or not everything of the chosen target) loaded, or the driver hung."""
        return self.observed in ("none", UNKNOWN) or bool(self.failures)


@dataclass(frozen=True)
class VerifiedGpu:
    index: int
    name: str
    compute_capability: str
    status: str  # ok, failed, timed out
    error: str | None
    seconds: float


@dataclass(frozen=True)
class Disagreement:
    """A bug in archgap's rules (report.verify writes the issue to file about it)."""

    path: str
    gpu_index: int
    predicted: str
    observed: str


@dataclass(frozen=True)
class VerifyReport:
    driver_library: str
    driver_cuda: str | None  # cuDriverGetVersion as X.Y
    driver_version: str | None  # the kernel driver (nvidia-smi / NVML), when known
    driver_ptx_isa: str | None  # the newest PTX ISA the scan assumes the driver JITs
    error: str | None  # why the driver could not be used (no GPU, no libcuda.so.1)
    gpus: tuple[VerifiedGpu, ...]
    checks: tuple[Check, ...]
    skipped: tuple[tuple[str, str], ...]  # (path, why it is not loaded)
    problems: tuple[tuple[str, str], ...]
    disagreements: tuple[Disagreement, ...]
    binaries: tuple[BinaryFacts, ...] = ()  # the files as read (what a bug report names)

    @property
    def settled(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.settled)

    @property
    def agreements(self) -> int:
        return sum(1 for c in self.settled if c.agrees)

    def exit_code(self, named: bool) -> int:
        """``archgap verify``'s: 2 no GPU or driver; 1 a disagreement, a hung GPU, chosen code
        that did not all load, or (``named``: the libraries were named) one that did not load at
        all; else 0."""
        if self.error or not self.gpus:
            return 2
        failed = any(c.failures or (named and c.load_failure) for c in self.checks)
        hung = any(g.status != "ok" for g in self.gpus)
        return 1 if self.disagreements or failed or hung else 0


NOT_LOADABLE = "a static archive or object file: linked into a program, never loaded as it is"


def load_plan(
    binaries: Sequence[BinaryFacts],
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The verify section's libraries (the entries the verdicts count) and the files left out."""
    plan: list[dict[str, Any]] = []
    skipped: list[tuple[str, str]] = []
    for binary in sorted(binaries, key=lambda b: b.path):
        # the verdicts do not count relocatable cubins (nvcc -rdc output: nothing loads them
        # before a device link), so the driver is not offered them either
        entries = tuple(e for e in runtime_entries(binary) if e.relocatable is not True)
        if not entries:
            if binary.error:
                skipped.append((binary.path, f"unreadable: {binary.error}"))
            continue
        if binary.format == "archive" or binary.path.endswith(".o"):
            skipped.append((binary.path, NOT_LOADABLE))
            continue
        plan.append(
            {
                "path": binary.path,
                "entries": [
                    {
                        "offset": e.offset,
                        "kind": e.kind,
                        "arch": e.arch,
                        "variant": e.variant,
                        "size": e.stored_size,
                        "listed": e.listed,
                        "section": e.section,
                        "ptx_isa": e.ptx_isa,
                    }
                    for e in entries
                ],
            }
        )
    return plan, skipped


def driver_ptx_isa(driver_version: str | None, cuda: str | None) -> str | None:
    """The PTX ISA rule of the scan: from the kernel driver's version when known (what `scan`
    uses), else from the CUDA version the driver API reports."""
    if driver_version:
        return max_ptx_isa_for_driver(driver_version)
    release = toolkit_release(cuda) if cuda else None
    return release.ptx_isa if release else None


def _error(value: Any) -> str | None:
    """A driver failure as text: "cuInit: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable ..."."""
    if not isinstance(value, Mapping):
        return None
    call, name, code = value.get("call"), value.get("name"), value.get("code")
    text = str(value.get("text") or "")
    if call in ("child", "probe") or not name:
        return text or (str(name) if name else None)
    head = f"{call}: {name}" + (f" ({code})" if isinstance(code, int) else "")
    return f"{head}: {text}" if text else head


def _attempt(row: Mapping[str, Any]) -> Attempt:
    error = row.get("error") if isinstance(row.get("error"), Mapping) else {}
    return Attempt(
        image=str(row.get("image") or ""),
        ok=bool(row.get("ok")),
        error=str(error["name"]) if error and error.get("name") else None,
        error_text=str(error["text"]) if error and error.get("text") else None,
        error_log=str(row.get("error_log") or ""),
        info_log=str(row.get("info_log") or ""),
        seconds=float(row.get("seconds") or 0.0),
    )


def _number(value: Any, cast: type[float] | type[int]) -> Any:
    return cast(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _check(
    row: Mapping[str, Any], gpu_index: int, predicted: LibraryVerdict | None, owner: tuple[str, str]
) -> Check:
    return Check(
        path=str(row.get("path")),
        package=owner[0],
        version=owner[1],
        gpu_index=gpu_index,
        predicted=_observable(predicted) if predicted else UNKNOWN,
        prediction=predicted.reason if predicted else "no prediction for this file",
        deciding_entry=predicted.deciding_entry if predicted else None,
        observed=str(row.get("outcome") or UNKNOWN),
        observation=str(row.get("reason") or ""),
        target=row.get("target") if isinstance(row.get("target"), str) else None,
        images=int(row.get("images") or 0),
        loaded=int(row.get("loaded") or 0),
        empty=int(row.get("empty") or 0),
        functions=_number(row.get("functions"), int),
        seconds=float(row.get("seconds") or 0.0),
        jit_ms=_number(row.get("jit_ms"), float),
        attempts=_attempts(row.get("attempts")),
        failures=_attempts(row.get("failures")),
    )


def _observable(predicted: LibraryVerdict) -> str:
    """The scan's verdict as the driver shows it when it loads the file: ``blocked`` (here only
    PTX newer than the driver) loads nothing, and a library serving the GPU with a thin share of
    its modules (``partial``) loads the entry that decided it, SASS natively, PTX by JIT."""
    if predicted.verdict == "blocked":
        return "none"
    if predicted.verdict == "partial":
        return "native" if " SASS " in f" {predicted.deciding_entry} " else "jit"
    return predicted.verdict


def _gpu(row: Mapping[str, Any]) -> VerifiedGpu:
    return VerifiedGpu(
        index=int(row.get("index") or 0),
        name=str(row.get("name") or ""),
        compute_capability=str(row.get("compute_capability") or ""),
        status=str(row.get("status") or "failed"),
        error=_error(row.get("error")),
        seconds=float(row.get("seconds") or 0.0),
    )


def _predictions(
    groups: Sequence[PackageBinaries], gpu: VerifiedGpu, isa: str | None
) -> dict[str, LibraryVerdict]:
    """The scan's verdict on the GPU for each library path (none for an unknown capability)."""
    cc = ComputeCapability.parse(gpu.compute_capability)
    predicted: dict[str, LibraryVerdict] = {}
    if cc is not None:
        target = GpuTarget(f"GPU {gpu.index}", cc, "present", "CUDA driver API")
        for package in verdicts_for(groups, [target], major_minor(isa) if isa else None):
            predicted.update((lib.path, lib) for lib in package.libraries)
    return predicted


def _disagreements(checks: Sequence[Check]) -> tuple[Disagreement, ...]:
    """The settled checks where the driver did other than the scan predicted."""
    return tuple(
        Disagreement(c.path, c.gpu_index, c.predicted, c.observed)
        for c in checks
        if c.settled and not c.agrees
    )


def _attempts(rows: Any) -> tuple[Attempt, ...]:
    return tuple(_attempt(a) for a in rows or () if isinstance(a, Mapping))


def compare(
    section: Mapping[str, Any],
    binaries: Sequence[BinaryFacts],
    env: PythonEnvironment,
    skipped: Sequence[tuple[str, str]] = (),
    driver_version: str | None = None,
) -> VerifyReport:
    """The verify section's answer beside the scan's verdicts for the same GPUs and driver."""
    number = section.get("driver_version")
    cuda = cuda_version_text(number) if isinstance(number, int) and number > 0 else None
    isa = driver_ptx_isa(driver_version, cuda)
    groups = group_by_package(env, binaries)
    owners = {b.path: (g.package, g.version) for g in groups for b in g.binaries}
    gpus: list[VerifiedGpu] = []
    checks: list[Check] = []
    for row in section.get("gpus") or ():
        gpu = _gpu(row)
        gpus.append(gpu)
        predicted = _predictions(groups, gpu, isa)
        for lib in row.get("libraries") or ():
            path = str(lib.get("path"))
            owner = owners.get(path, (UNOWNED, ""))
            checks.append(_check(lib, gpu.index, predicted.get(path), owner))
    report = VerifyReport(
        driver_library=str(section.get("library") or "libcuda.so.1"),
        driver_cuda=cuda,
        driver_version=driver_version,
        driver_ptx_isa=isa,
        error=_error(section.get("error")),
        gpus=tuple(gpus),
        checks=tuple(checks),
        skipped=tuple(skipped),
        problems=tuple(
            (str(p[0]), str(p[1])) for p in section.get("problems") or () if len(p) == 2
        ),
        disagreements=_disagreements(checks),
        binaries=tuple(binaries),
    )
    return report
