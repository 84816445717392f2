"""Which files a scan searches deeply: only those whose listed fatbin leaves a judged GPU open.

A deep read searches every data section of a file for containers and cubins cuobjdump does not
list; on a torch environment it is most of a scan's time. The verdicts
(analysis/verdicts/verdicts.py) count those hidden entries (but relocatable ones) beside the
listed ones only for a library that can load device code itself (``loads_device_code``: the
runtime registers the listed fatbin alone, so a library that neither imports nor names a
function to load a module with, nor needs or opens libcuda, has no way to run them), and a
listed kernel cubin native to a GPU decides alone. A library that cannot load them, or whose
listed fatbin holds such a cubin for every GPU the scan judges, gets the same verdict and
deciding entry with or without them (the first a note in its reason where they would have
served). So such a scan reads each file plainly and then searches deeply only the files where
the hidden entries can matter: a library that loads device code itself with no listed kernels
at all, or a judged GPU without native SASS in the listed fatbin (cuFFT 12.0 lists one sm_75
cubin; its kernels for every other GPU are in ``.ldata``). Not searched on a torch environment:
libtorch_cpu.so (426 MiB), libtorch_python.so, libcudnn_heuristic.so, ...

The compatibility rules stay in the analysis: the request carries, for every compute capability
the scan may judge, the SASS targets that run on it natively (``analysis/deep_plan.py``):

  "native": {"9.0": ["sm_90", "sm_90a"], ...}   every compute capability the scan may judge
  "named": ["9.0", ...]                          the GPUs named with --gpu/--require
  "default": ["7.5", ...]                        judged when no GPU is named or present

The GPUs present are the gpu section's, from the same probe run. When one of them has a compute
capability the plan does not know, every file is searched deeply (the analysis may still identify
the GPU by its name; the probe cannot).
"""

from __future__ import annotations

from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    FrozenSet,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
)

from .facts import BinaryFacts, KernelEntry

if TYPE_CHECKING:  # fatbin is imported where files are read
    from .fatbin import Summarize

Progress = Callable[[int, int, str], None]  # (files done, files in all, the last one)


def runtime_entries(binary: BinaryFacts) -> Tuple[KernelEntry, ...]:
    """Entries the CUDA runtime or the library itself can load on a GPU.

    LTO-IR needs nvJitLink first; a shared object's ``__nv_relfatbin`` is the relocatable copy
    kept for device linking, not what the runtime launches from."""
    is_object = binary.format == "archive" or binary.path.endswith(".o")
    return tuple(
        e
        for e in binary.entries
        if e.kind in ("sass", "ptx") and (is_object or e.section != "__nv_relfatbin")
    )


def kernel_less(entry: KernelEntry) -> bool:
    """An entry whose content shows it holds no kernel: a cubin without a ``.text`` section, PTX
    without an ``.entry`` (kb/roles.json "kernel_less"; read by ``content.has_kernel``). One not
    looked at (large, or compressed in a way the probe cannot unpack) may hold kernels."""
    return entry.kernels is False and entry.kind in ("sass", "ptx")


def judged_native_sets(plan: Any, gpu_section: Any) -> Optional[List[FrozenSet[str]]]:
    """The native SASS targets of each compute capability the scan will judge; None when the
    plan cannot say (every file is then searched deeply)."""
    if not isinstance(plan, Mapping) or not isinstance(plan.get("native"), Mapping):
        return None
    native = plan["native"]
    present: List[str] = []
    gpus = gpu_section.get("gpus") if isinstance(gpu_section, Mapping) else None
    for gpu in gpus if isinstance(gpus, list) else ():
        cc = gpu.get("compute_capability") if isinstance(gpu, Mapping) else None
        if not isinstance(cc, str) or cc.strip() not in native:
            return None
        present.append(cc.strip())
    judged = list(_strings(plan.get("named"))) + present or list(_strings(plan.get("default")))
    if any(cc not in native for cc in judged):
        return None
    return [frozenset(_strings(native[cc])) for cc in judged]


def _strings(value: Any) -> Sequence[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


# The driver library: what a library that loads modules itself links or opens (libcuda.so.1;
# nvcuda.dll on Windows, in a PE image's imports)
DRIVER_LIBRARIES = ("libcuda.so", "nvcuda.dll")


def loads_device_code(binary: BinaryFacts) -> Optional[str]:
    """How ``binary`` can load device code outside its listed fatbin, which the runtime registers
    for it: the first sign of its content ("imports cuModuleLoadData", "needs libcuda.so.1",
    "dlopens libcuda.so.1": a statically linked CUDA runtime opens the driver itself, "names
    cuModuleLoadData": it resolves a loader by name, as a dlopen stub does); "" when its tables
    and strings were read and show none; None when they were not read (it may)."""
    for name in binary.loader_imports or ():
        return "imports %s" % name
    for what, names in (("needs", binary.needed), ("dlopens", binary.dlopens)):
        for name in names or ():
            if name.lower().startswith(DRIVER_LIBRARIES):
                return "%s %s" % (what, name)
    for name in binary.loader_names or ():
        return "names %s" % name
    unread = (binary.loader_imports, binary.loader_names, binary.needed, binary.dlopens)
    return None if any(facts is None for facts in unread) else ""


def needs_deep_search(binary: BinaryFacts, native_sets: List[FrozenSet[str]]) -> bool:
    """Whether hidden entries could change what the scan says about ``binary`` (read plainly):
    unless it cannot load device code itself (``loads_device_code``), or its listed fatbin has
    a kernel cubin native to every judged GPU."""
    if loads_device_code(binary) == "":
        return False
    listed = {
        "sm_%d%s" % (e.arch, e.variant)
        for e in runtime_entries(binary)
        if e.kind == "sass" and e.listed and not kernel_less(e)
    }
    return not listed or not all(listed & runs for runs in native_sets)


def deepened(files: Sequence[BinaryFacts], native_sets: List[FrozenSet[str]]) -> List[BinaryFacts]:
    """``files`` (read plainly), each regular file here whose hidden entries could change a
    verdict on the judged GPUs (``needs_deep_search``) read again deeply: what the build gate of
    ``kernels --require`` judges, as a scan would. A file inside an archive stays as read."""
    import os

    from .fatbin import read_binary

    return [
        read_binary(f.path, True)
        if not f.deep and needs_deep_search(f, native_sets) and os.path.isfile(f.path)
        else f
        for f in files
    ]


def read_selectively(
    found: Sequence[Tuple[str, Optional[BinaryFacts]]],
    native_sets: List[FrozenSet[str]],
    progress: Optional[Progress] = None,
    summarize: Summarize = None,
) -> Iterator[BinaryFacts]:
    """Every file of ``found`` (path, None: to read; path, facts: a ready row) read plainly,
    and again deeply when it ``needs_deep_search``: each file whole in one step, so the plain
    reads too are shared with the helper process of ``read_binaries``. With ``summarize``
    each file's entries are merged into rows as they are found."""
    from .fatbin import read_binaries, read_binary

    def read(path: str) -> BinaryFacts:
        facts = read_binary(path, False, summarize)
        if needs_deep_search(facts, native_sets):
            return read_binary(path, True, summarize)
        return facts

    paths = [path for path, ready in found if ready is None]
    read_all = iter(read_binaries(paths, True, progress, read=read))
    for _, ready in found:
        yield ready if ready is not None else next(read_all)


__all__ = [
    "deepened",
    "judged_native_sets",
    "kernel_less",
    "loads_device_code",
    "needs_deep_search",
    "read_selectively",
    "runtime_entries",
]
