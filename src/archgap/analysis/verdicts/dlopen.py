"""Check 3b of the load model: the CUDA libraries a library opens at run time by soname.

A library that imports ``dlopen`` and keeps a CUDA library's soname in its read-only data
(``BinaryFacts.dlopens``, probe.binary.dlnames; which sonames are CUDA libraries: kb/load.json
"cuda_libraries") opens that library when it uses it (ctranslate2: ``libcublas.so.12``, at its
first GEMM). dlopen searches for it as dlopen(3) says, for the calling library alone: its
RPATH/RUNPATH (``$ORIGIN`` is its own directory), LD_LIBRARY_PATH, the loader's cache and the
trusted directories (probe.loader) — not site-packages, where a wheel put it. A library of
that soname another library of the process needs (DT_NEEDED) is found when that one was loaded
first. Not found: a finding naming the soname and the package that ships it. The binary does
not say whether the call is always made (cuFFT opens NVRTC only for LTO callbacks), so the
finding is "unknown" (needed when used) and blocks nothing, unless the package documents that
its GPU work needs the library (kb/load.json "dlopen" "required"): then it "fails" and blocks
the library, as a DT_NEEDED library that is not found does (check 3).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from archgap.analysis.verdicts.loadcommon import LoadFinding, Status, search_dirs
from archgap.analysis.verdicts.loadcommon import base as _base
from archgap.analysis.verdicts.loadcommon import block as _block
from archgap.analysis.verdicts.loadcommon import names as _names
from archgap.kb import load as kb
from archgap.kb.fixes import fix_text
from archgap.probe.facts import TOOLKIT_DIRS, BinaryFacts, LoaderFacts, PythonEnvironment


def dlopened(
    env: PythonEnvironment,
    elves: Sequence[BinaryFacts],
    owner: Mapping[str, str],
    loader: LoaderFacts | None,
    blocked: dict[tuple[str, str], str],
    gating: bool,
) -> list[LoadFinding]:
    """One finding per package, provider and status for the CUDA libraries its libraries may
    open by soname that dlopen would not find for them."""
    rules = kb.dlopen_rules()
    missing = _missing(env, elves, owner, loader, rules)
    return [_finding(key, names, rules, blocked, gating) for key, names in sorted(missing.items())]


# (package, provider, status) -> soname -> [(library, where it was looked for, its fix)]
_Missing = dict[tuple[str, str, Status], dict[str, list[tuple[BinaryFacts, str, str]]]]


def _missing(
    env: PythonEnvironment,
    elves: Sequence[BinaryFacts],
    owner: Mapping[str, str],
    loader: LoaderFacts | None,
    rules: kb.DlopenRules,
) -> _Missing:
    """Each soname a library opens that dlopen does not find for it, under its package, the
    package that ships it and the finding's status."""
    known = kb.cuda_libraries()
    files = {os.path.normpath(p) for d in env.distributions for p in d.native_files}
    files.update(os.path.normpath(p) for p in env.unowned_native_files)
    files.update(os.path.normpath(b.path) for b in elves)
    missing: _Missing = {}
    for binary in elves:
        wanted = _opened(binary, known)
        package = owner.get(binary.path, "")
        found_families = {_family(n) for n in wanted if _resolves(binary, n, files, loader)}
        for name in wanted:
            if _family(name) in found_families:
                continue  # one of the sonames it tries (libcudart.so.12 or .11.0) is there
            if _loaded_beside(binary, name, files, elves):
                continue
            where, fix, sure = _not_found(
                binary, name, files, elves, loader, known[name].package, env.site_packages
            )
            required = rules.required.get(package)
            status: Status = "fails" if sure and required and name in required[0] else "unknown"
            key = (package, known[name].package, status)
            missing.setdefault(key, {}).setdefault(name, []).append((binary, where, fix))
    return missing


def _opened(binary: BinaryFacts, known: Mapping[str, kb.CudaLibrary]) -> list[str]:
    """The CUDA libraries the binary may open by soname: not the driver's, not one it needs
    (DT_NEEDED: check 3's), not itself."""
    driver_libs, _ = kb.driver_libraries()
    return [n for n in binary.dlopens or () if n in known and n not in driver_libs
            and n not in (binary.needed or ()) and n != _base(binary.path)]  # fmt: skip


def _finding(
    key: tuple[str, str, Status],
    names: Mapping[str, list[tuple[BinaryFacts, str, str]]],
    rules: kb.DlopenRules,
    blocked: dict[tuple[str, str], str],
    gating: bool,
) -> LoadFinding:
    """The finding for one package, provider and status; where it fails (a library the package
    documents its GPU work needs), each library that opens it is blocked."""
    package, _, status = key
    rows = [row for group in names.values() for row in group]
    libs = sorted({b.path: b for b, _, _ in rows}.values(), key=lambda b: b.path)
    listed = ", ".join(sorted(names))
    required = rules.required.get(package)
    chain = [f"{_names(libs)} opens {listed} at run time (dlopen)"]
    if status == "fails" and required:
        use = f"which {package} documents its GPU work needs"
        chain.append(required[1])
        source = f"{required[2]}; {rules.source}"
        for name, group in names.items():
            for binary, _, _ in group:
                _block(blocked, binary.path, f"it opens {name} at run time (dlopen), which "
                       "the dynamic loader does not find for it")  # fmt: skip
    else:
        use = "needed when it uses it (the binary does not say whether every run does)"
        source = rules.source
    where = "; ".join(sorted({w for _, w, _ in rows}))
    fix = "; ".join(sorted({f for _, _, f in rows}))
    first = sorted(names)[0]
    return LoadFinding(
        "dlopen-library",
        status,
        "",
        package,
        tuple(b.path for b in libs),
        (*chain, where),
        f"{_names(libs)} of {package or 'no distribution'} opens {listed} at run time "
        f"by dlopen, {use}: {where} ('{first}: cannot open shared object file' "
        "when it is used)",
        fix,
        source,
        gating and status == "fails",
    )


def _loaded_beside(
    binary: BinaryFacts, name: str, files: set[str], elves: Sequence[BinaryFacts]
) -> bool:
    """Whether a library of the environment needs (DT_NEEDED) both ``binary`` and ``name``,
    which it ships: loading that one loads ``name`` with ``binary``, before ``binary`` runs (as
    torch's libtorch_cuda.so loads cuDNN and cuBLAS). A library ``binary`` is loaded without is
    then still the case ``_not_found`` names."""
    own = _base(binary.path)
    shipped = any(os.path.basename(p) == name for p in files)
    return shipped and any(
        own in (b.needed or ()) and name in (b.needed or ()) for b in elves if b is not binary
    )


def _family(soname: str) -> str:
    """The library a soname is a version of: libcublas.so.12 -> libcublas."""
    return soname.split(".so", 1)[0]


def _search_dirs(binary: BinaryFacts) -> list[str]:
    """The library's own absolute RPATH/RUNPATH directories, ``$ORIGIN`` made its directory."""
    return [d for d in search_dirs(binary) if d.startswith("/")]


def _resolves(binary: BinaryFacts, name: str, files: set[str], loader: LoaderFacts | None) -> bool:
    """Whether dlopen finds ``name`` for ``binary``: its RPATH/RUNPATH (files of the
    environment, the toolkits' directories the loader section listed), else the loader's
    names (LD_LIBRARY_PATH, the cache, the trusted directories)."""
    if name in (binary.runpath_found or ()):
        return True
    listed = dict(loader.toolkit_dirs) if loader is not None else {}
    for directory in _search_dirs(binary):
        if os.path.join(directory, name) in files or name in listed.get(directory, ()):
            return True
    return loader is not None and name in loader.names


def _where_found(dirs: Sequence[str]) -> str:
    """Where dlopen looks for the caller, in words, for a fix."""
    if dirs:
        return (
            f"in this library's RUNPATH ({', '.join(dirs)}), on LD_LIBRARY_PATH or in the "
            "loader's cache, not elsewhere in site-packages"
        )
    return "on LD_LIBRARY_PATH or in the loader's cache, not in site-packages"


def _unread(
    binary: BinaryFacts, dirs: Sequence[str], env_dirs: Sequence[str], loader: LoaderFacts
) -> list[str]:
    """The search directories whose files are not known: not in the environment, not a
    toolkit's the loader section listed (a /usr/local/cuda one it did not list does not
    exist), not one the loader section read, not one of the library's own absolute RUNPATH
    directories the probe looked up on the target (``runpath_found``)."""
    listed = {d for d, _ in loader.toolkit_dirs} | set(loader.directories)
    if binary.runpath_found is not None:
        listed |= {d.rstrip("/") for d in binary.runpath}
    inside = tuple(d.rstrip("/") + "/" for d in env_dirs)
    return [d for d in dirs if not (d + "/").startswith(inside) and d not in listed
            and not d.startswith(TOOLKIT_DIRS)]  # fmt: skip


def _not_found(
    binary: BinaryFacts,
    name: str,
    files: set[str],
    elves: Sequence[BinaryFacts],
    loader: LoaderFacts | None,
    provider: str,
    env_dirs: Sequence[str],
) -> tuple[str, str, bool]:
    """(where it was looked for, the fix, whether it is surely not found)."""
    dirs = _search_dirs(binary)
    runpath = f"its RPATH/RUNPATH {':'.join(binary.runpath)}" if binary.runpath else "no RUNPATH"
    here = sorted(os.path.dirname(p) for p in files if os.path.basename(p) == name)
    preload = sorted(_base(b.path) for b in elves if name in (b.needed or ()) and b is not binary)
    if loader is None:
        return (
            f"not in the directories it names ({runpath}); the target's loader cache was not read",
            fix_text("dlopen-loader-unread", library=name),
            False,
        )
    unread = _unread(binary, dirs, env_dirs, loader)
    searched = f"{runpath}, {', '.join(loader.directories)}"
    if here and preload:
        return (
            f"dlopen does not search {here[0]} ({searched}); it is found there only when "
            f"{', '.join(preload[:3])}, which needs it (DT_NEEDED), was loaded first",
            fix_text("dlopen-preload", needer=preload[0], directory=here[0]),
            False,
        )
    if here:
        return (
            f"installed in {here[0]}, which dlopen does not search ({searched})",
            fix_text("dlopen-not-searched", directory=here[0]),
            not unread,
        )
    return (
        f"no installed package ships it and dlopen does not find it ({searched})",
        fix_text("dlopen-provider", provider=provider, where=_where_found(dirs)),
        not unread,
    )


__all__ = ["dlopened"]
