"""What the DLL search order needs of a Windows wheel (analysis.verdicts.dllsearch): the
directories its own modules add to the DLL search path, and the distributions it requires.

Read only for a wheel with PE members or no native member (pure Python): its METADATA's
``Requires-Dist`` lines, and the modules directly inside each top-level package
(``torch/__init__.py``, ``cupy/_environment.py``) that name ``add_dll_directory``
(probe.environment.dlldirs reads the calls). A module deeper down is
not read; more modules than ``MAX_MODULES`` or bytes than ``MAX_BYTES`` leave a place "not read",
so that what they might add is "unknown", never "absent".
"""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from dataclasses import replace
from email.parser import BytesHeaderParser

from archgap.probe.environment.dlldirs import registered_directories
from archgap.probe.facts import Distribution

MAX_MODULES = 64  # top-level modules read per wheel at most
MAX_BYTES = 8 << 20  # of source read per wheel at most
MAX_MODULE_BYTES = 2 << 20
MAX_METADATA_BYTES = 1 << 20


def with_dll_search(
    zf: zipfile.ZipFile,
    infos: list[zipfile.ZipInfo],
    label: str,
    distributions: list[Distribution],
    formats: Sequence[str],
) -> None:
    """The wheel's distribution with its Requires-Dist and the DLL directories its modules add,
    when the wheel has PE images (``formats``) or no native file (pure Python, whose code may
    add another package's folder); a Linux wheel's as it is (not read: None)."""
    if distributions and ("pe" in formats or not distributions[0].native_files):
        distributions[0] = _read(zf, infos, label, distributions[0])


def _read(
    zf: zipfile.ZipFile, infos: list[zipfile.ZipInfo], label: str, dist: Distribution
) -> Distribution:
    root = label.rstrip("/")
    modules = [i for i in infos if i.filename.endswith(".py") and i.filename.count("/") == 1
               and not i.filename.split("/")[0].endswith((".dist-info", ".data"))]  # fmt: skip
    found: list[str] = []
    unread: list[str] = []
    spent = 0
    for number, info in enumerate(modules):
        if number >= MAX_MODULES or spent + info.file_size > MAX_BYTES:
            unread.append(f"{root}/{info.filename}: not read ({len(modules)} modules)")
            break
        if info.file_size > MAX_MODULE_BYTES:
            unread.append(f"{root}/{info.filename}: not read ({info.file_size} bytes)")
            continue
        spent += info.file_size
        try:
            source = zf.read(info).decode("utf-8", "replace")
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, RuntimeError) as exc:
            unread.append(f"{root}/{info.filename}: {exc}")
            continue
        path = f"{root}/{info.filename}"
        directories, lines = registered_directories(source, path)
        found += [d for d in directories if d not in found]
        unread += [f"{path}:{line}" for line in lines]
    return replace(
        dist,
        requires=dist.requires or _requires(zf, dist.dist_info[len(root) + 1 :]),
        dll_directories=tuple(found),
        dll_directories_unread=tuple(unread),
    )


def _requires(zf: zipfile.ZipFile, dist_info: str) -> tuple[str, ...]:
    try:
        with zf.open(f"{dist_info}/METADATA") as stream:
            data = stream.read(MAX_METADATA_BYTES)
    except (KeyError, zipfile.BadZipFile, OSError, EOFError, ValueError, RuntimeError):
        return ()
    headers = BytesHeaderParser().parsebytes(data)
    return tuple(str(v) for v in headers.get_all("Requires-Dist") or ())


__all__ = ["with_dll_search"]
