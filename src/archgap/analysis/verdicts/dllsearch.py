"""Check 3 of the load model for Windows images: the CUDA DLLs a DLL or ``.pyd`` imports are
found by the DLL search order of a Python process.

Python 3.8+ loads an extension module, and ctypes a DLL named by its path, with
``LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR``: the DLLs it imports are
looked for in the directory of the module being loaded, the application directory, System32 and
the directories added with ``os.add_dll_directory``; ``PATH`` and the current directory are not
(kb/windows.json "search_order": Python's What's New 3.8, Microsoft's "Dynamic-link library
search order"). A DLL of that name already loaded in the process is used as it is: what a
package's import loads first (torch preloads every DLL of ``torch/lib``, which it also adds).

So an imported CUDA DLL (a name kb/load.json "cuda_libraries" knows: ``cudart64_12.dll``,
``cublas64_13.dll``) resolves when a file of that name is in the importing image's own
directory, or in a directory that the package's own code, or the code of a distribution it
requires (``Requires-Dist``, followed through the installed ones), adds to the search path
(``Distribution.dll_directories``, read from the source: probe.environment.dlldirs), or when it
is a DLL the driver or the system provides (kb/windows.json). Otherwise:
- "fails" (the library is blocked): every required distribution is there and each addition was
  read, so nothing the process runs puts it on the search path; the finding names where a file
  of that name lies unsearched (an NVIDIA wheel's ``nvidia/cu13/bin/x86_64``), if anywhere;
- "unknown": a required distribution was not judged (a wheel scanned alone: bitsandbytes takes
  cuBLAS from torch's ``torch/lib``), or an addition depends on more than the package's place
  (``sys.exec_prefix``, ``CUDA_PATH``), so the directory it adds was not read.
Imports of the delay-load table are judged with the others (they resolve at first call by the
process's default order, which may search ``PATH``: not told apart yet).
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Mapping, Sequence

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from archgap.analysis.verdicts.loadcommon import LoadFinding, Status
from archgap.analysis.verdicts.loadcommon import block as _block
from archgap.analysis.verdicts.loadcommon import names as _names
from archgap.analysis.verdicts.verdicts import has_device_code
from archgap.kb import load as kb
from archgap.kb.fixes import fix_text
from archgap.kb.windows import outside_packages, search_order
from archgap.probe.facts import BinaryFacts, Distribution, PythonEnvironment

# The marker values of a Windows x64 process (PEP 508): which Requires-Dist lines apply there.
WINDOWS_MARKERS = {"sys_platform": "win32", "platform_system": "Windows", "os_name": "nt",
                   "platform_machine": "AMD64", "extra": ""}  # fmt: skip


Missing = dict[str, list[tuple[BinaryFacts, list[str]]]]  # DLL -> [(image, where it lies)]


def dll_search(
    env: PythonEnvironment,
    images: Sequence[BinaryFacts],
    owner: Mapping[str, str],
    blocked: dict[tuple[str, str], str],
    gating: bool,
) -> list[LoadFinding]:
    """One finding per package and status for the CUDA DLLs its Windows images import that the
    DLL search order does not find."""
    folders = _folders(env, images)
    installed: dict[str, Distribution] = {canonicalize_name(d.name): d for d in env.distributions}
    missing: dict[tuple[str, Status], Missing] = {}
    notes: dict[str, list[str]] = {}
    for image in images:
        package = owner.get(image.path, "")
        dist = installed.get(canonicalize_name(package)) if package else None
        required, absent = _required(dist, installed)
        unread = [f"the directory added at {u} was not read"
                  for x in required for u in x.dll_directories_unread]  # fmt: skip
        unread += [f"what {x.name} adds to the DLL search path was not read (its modules)"
                   for x in required if x.dll_directories is None]  # fmt: skip
        status: Status = "unknown" if absent or unread or dist is None else "fails"
        for name, elsewhere in _not_found(image, required, folders):
            missing.setdefault((package, status), {}).setdefault(name, []).append(
                (image, elsewhere)
            )
            notes[package] = [f"{a} (Requires-Dist) was not judged" for a in absent]
            notes[package] += unread
    return [
        _finding(package, status, names, notes.get(package, []), blocked, gating)
        for (package, status), names in sorted(missing.items())
    ]


def _not_found(
    image: BinaryFacts, required: Sequence[Distribution], folders: Mapping[str, set[str]]
) -> list[tuple[str, list[str]]]:
    """(name, the directories where a file of that name lies) of each CUDA DLL the image
    imports that neither its directory nor an added one holds, and no system DLL is."""
    known = {name.lower() for name in kb.cuda_libraries()}
    cuda = [n for n in image.needed or () if n.lower() in known]
    if not cuda and not has_device_code(image):
        return []
    searched = [_norm(posixpath.dirname(image.path))]
    searched += [_norm(d) for x in required for d in x.dll_directories or ()]
    return [
        (name, sorted(d for d, names in folders.items() if name.lower() in names))
        for name in cuda
        if outside_packages(name) is None and not _found(name, searched, folders)
    ]


def _finding(
    package: str,
    status: Status,
    names: Missing,
    notes: list[str],
    blocked: dict[tuple[str, str], str],
    gating: bool,
) -> LoadFinding:
    images = sorted({b.path: b for rows in names.values() for b, _ in rows}.values(),
                    key=lambda b: b.path)  # fmt: skip
    listed = ", ".join(sorted(names))
    elsewhere = sorted({d for rows in names.values() for _, found in rows for d in found})
    where = (
        "neither its own directory nor a directory that it or what it requires adds "
        "(os.add_dll_directory) holds it, and PATH is not searched"
    )
    if elsewhere:
        where += f"; a file of that name lies in {', '.join(elsewhere[:3])}, which is not added"
    cause = f"{_names(images)} of {package or 'no distribution'} imports {listed}: {where}"
    if status == "fails":
        for name, rows in names.items():
            for image, _ in rows:
                _block(blocked, image.path, f"{name} is not found by the DLL search order")
        cause += " (ImportError: DLL load failed while importing ...: The specified module could "
        cause += "not be found)"
    elif notes:
        cause += f"; {notes[0]}" + (f" (and {len(notes) - 1} more)" if len(notes) > 1 else "")
    chain = (f"{_names(images)} imports {listed} (PE import table)", where, *notes[:3])
    return LoadFinding("needed-library", status, "", package, tuple(b.path for b in images),
                       chain, cause, _fix(package, status, names, bool(elsewhere)),
                       search_order().source, gating and status == "fails")  # fmt: skip


def _fix(package: str, status: Status, names: Missing, elsewhere: bool) -> str:
    what = package or "it"
    if status == "unknown":
        return fix_text("dll-unread", package=what)
    if elsewhere:
        return fix_text("dll-add-directory", dll=sorted(names)[0], package=what)
    known = kb.cuda_libraries()
    lower = {n.lower(): e.package for n, e in known.items()}
    providers = " ".join(sorted({lower[n.lower()] for n in names}))
    return fix_text("dll-providers", providers=providers)


def _folders(env: PythonEnvironment, images: Sequence[BinaryFacts]) -> dict[str, set[str]]:
    """directory (normalized, lower case) -> the file names in it (lower case), of every native
    file of the environment."""
    paths = [p for d in env.distributions for p in d.native_files]
    paths += list(env.unowned_native_files) + [b.path for b in images]
    folders: dict[str, set[str]] = {}
    for path in paths:
        folder, name = posixpath.split(path.replace("\\", "/"))
        folders.setdefault(_norm(folder), set()).add(name.lower())
    return folders


def _norm(path: str) -> str:
    return posixpath.normpath(path.replace("\\", "/")).lower()


def _found(name: str, searched: Sequence[str], folders: Mapping[str, set[str]]) -> bool:
    lower = name.lower()
    for folder in searched:
        if "*" in folder or "?" in folder or "[" in folder:  # a glob the code adds
            if any(fnmatch.fnmatchcase(d, folder) and lower in n for d, n in folders.items()):
                return True
        elif lower in folders.get(folder, ()):
            return True
    return False


def _required(
    dist: Distribution | None, installed: Mapping[str, Distribution]
) -> tuple[list[Distribution], list[str]]:
    """(the distribution and those it requires on Windows, followed through the installed ones;
    the names of the required ones that are not installed)."""
    if dist is None:
        return [], []
    found = {canonicalize_name(dist.name): dist}
    absent: list[str] = []
    stack = [dist]
    while stack:
        for line in stack.pop().requires:
            try:
                req = Requirement(line)
                if req.marker is not None and not req.marker.evaluate(WINDOWS_MARKERS):
                    continue
            except (InvalidRequirement, InvalidMarker, UndefinedComparison,
                    UndefinedEnvironmentName):  # fmt: skip
                continue
            key = canonicalize_name(req.name)
            if key in found or key in absent:
                continue
            if key in installed:
                found[key] = installed[key]
                stack.append(installed[key])
            else:
                absent.append(key)
    return list(found.values()), absent


__all__ = ["dll_search"]
