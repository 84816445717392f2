"""``kernels``: every file's device code, here or on a target, and the build gate."""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from archgap.errors import UsageError
from archgap.request import binaries_request
from archgap.transport.target import DEFAULT_TIMEOUT, LOCAL, Target

if TYPE_CHECKING:
    from archgap.analysis.verdicts.compat import GpuTarget
    from archgap.claims import Claims
    from archgap.index.deps import Chosen
    from archgap.index.options import IndexOptions
    from archgap.probe.binary.facts import BinaryFacts
    from archgap.probe.binary.fatbin import Progress
    from archgap.results import KernelsResult


def kernel_files(
    paths: Sequence[str],
    *,
    deep: bool = False,
    detail: bool = True,
    target: Target = LOCAL,
    options: IndexOptions | None = None,
    root: str = "/",
    timeout: float = DEFAULT_TIMEOUT,
    resolved: list[Chosen] | None = None,
    progress: Progress | None = None,
    unverified: list[str] | None = None,
    strings: bool = True,
) -> list[BinaryFacts]:
    """The device code of ``paths`` on ``target``, read by the probe there (every entry with
    ``detail``, else one row per kind of entry); here, ``binaries.local_binaries`` (files,
    directories, wheels and their URLs, requirements resolved from ``options``' indexes, with
    their dependency sets when ``options.deps``, container images: ``options.platform`` picks
    from a multi-platform index, ``options.tls_verify`` whether a docker:// registry's
    certificate must verify); ``resolved`` is told the wheel each requirement resolved to,
    ``progress(done, total, path)`` as files are read here, ``unverified`` the archives read
    through range requests (the index's sha256 not checked); a path missing here is an
    unreadable row. Without ``strings``, files read here leave a linked library's strings unread
    (``dlopens``, ``compilers``, ``cuda_release`` None: probe.binary.hostelf.device_code_only).
    ``UsageError`` for URLs and requirements with a remote target, ``ProbeError`` when a remote
    probe fails."""
    from archgap.binaries import local_binaries
    from archgap.codec import decode
    from archgap.probe.binary.facts import BinaryFacts

    if target.is_local:
        with _reading(strings):
            return local_binaries(paths, deep, options, progress, resolved, detail, unverified)
    from archgap.index.options import URL_SCHEMES
    from archgap.orchestrate.shared import checked_facts

    if (options is not None and options.deps) or any(p.startswith(URL_SCHEMES) for p in paths):
        raise UsageError("URLs and requirements are read here: not with a remote target")
    facts = checked_facts(target, binaries_request(paths, deep, detail), timeout, root)
    return [decode(BinaryFacts, item) for item in facts.sections["binaries"]]


def kernels(
    paths: Sequence[str],
    *,
    deep: bool = False,
    require: Sequence[str] = (),
    strict: bool = False,
    target: Target = LOCAL,
    options: IndexOptions | None = None,
    root: str = "/",
    timeout: float = DEFAULT_TIMEOUT,
    detail: bool = True,
    progress: Progress | None = None,
    claims_from: str | None = None,
    config: bool = True,
    strings: bool = True,
) -> KernelsResult:
    """Every file's device code (see ``kernel_files``) and, with ``require`` (GPUs), the build
    gate (``strict``: only SASS counts; PTX alone fails too). ``UnknownGpu`` for a bad GPU name,
    ``UsageError`` for ``strict`` without ``require``. ``require=["claimed"]``: the gate checks
    what the build claims (archgap.claims: ``claims_from``, else found; ``config``: [tool.archgap]
    may say). Without ``strings`` (an output that shows device code only: ``kernels``' table),
    a linked library's strings are not read here (``kernel_files``): cuobjdump's work."""
    import time

    from archgap.results import KernelsResult

    claims = _claims(paths, require, claims_from, config) if require or claims_from else None
    if claims is not None:
        from archgap.analysis.recipe.claimed import judged_names

        require = judged_names(claims)
    required: list[GpuTarget] = []
    if require:  # each GPU once (a name given twice); its knowledge is loaded only then
        from archgap.orchestrate.shared import resolve

        required = list({g.label: g for g in resolve(require)}.values())
    if strict and not required:
        raise UsageError("--strict needs --require GPU")
    started = time.perf_counter()
    resolved: list[Chosen] = []
    unverified: list[str] = []
    files = kernel_files(
        paths, deep=deep, detail=detail, target=target, options=options, root=root,
        timeout=timeout, resolved=resolved, progress=progress, unverified=unverified,
        strings=strings,
    )  # fmt: skip
    gate = None
    if required:  # the build gate's rules are imported only when asked (~0.1 s of start-up)
        from archgap.analysis.recipe.gate import check_build

        judged = files
        if not deep and target.is_local:  # as a scan: deep where hidden entries may decide
            from archgap.analysis.deep_plan import deep_search_plan
            from archgap.probe.binary.deep_plan import deepened, judged_native_sets

            native_sets = judged_native_sets(deep_search_plan(require), None)
            with _reading(strings):
                judged = deepened(files, native_sets) if native_sets is not None else files
        if claims is None:
            gate = check_build(judged, required, strict)
        else:
            from archgap.analysis.recipe.claimed import check_claims

            gate = check_claims(judged, claims, strict)
    seconds = time.perf_counter() - started
    missing = tuple(p for p in _missing(paths) if target.is_local)
    return KernelsResult(
        tuple(paths), tuple(files), deep, seconds, gate, tuple(resolved), missing,
        tuple(unverified),
    )  # fmt: skip


def _claims(
    paths: Sequence[str], require: Sequence[str], claims_from: str | None, config: bool
) -> Claims | None:
    """What ``--require claimed`` asks to check: the build's claims, and what variant wheels
    among the paths declare (None: not asked for)."""
    from archgap.claims import VariantClaims, asks_claimed, requested

    variants: tuple[VariantClaims, ...] = ()
    if asks_claimed(require):
        from archgap.variant_claims import variant_claims

        variants = variant_claims(paths)
    return requested(require, claims_from, config, variants)


def _reading(strings: bool) -> AbstractContextManager[object]:
    """Where files read here have their strings read (the default), or not."""
    from contextlib import nullcontext

    from archgap.probe.binary.hostelf import device_code_only

    return nullcontext() if strings else device_code_only()


def _missing(paths: Sequence[str]) -> list[str]:
    """The paths that name no file here (not an image, a URL or a requirement either)."""
    absent = [p for p in paths if not os.path.lexists(p)]
    if not absent:  # the usual case: nothing more to import
        return []
    from archgap.binaries import is_index_target
    from archgap.image.targets import is_image

    return [p for p in absent if not (is_image(p, rootfs=False) or is_index_target(p))]
