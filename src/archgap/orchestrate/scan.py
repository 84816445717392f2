"""``scan``: an environment's native libraries judged on GPUs, here or on a target; and the
same analysis over wheels and images (``scan_archives``) or probe facts from anywhere."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from archgap.errors import ProbeError
from archgap.orchestrate.shared import check_driver, judge, prepare_judging, probe_facts, resolve
from archgap.probe.facts import ProbeResponse
from archgap.request import DEFAULT_SECTIONS, probe_request
from archgap.transport.target import DEFAULT_TIMEOUT, LOCAL, Target

if TYPE_CHECKING:
    from archgap.analysis.scan import ScanReport
    from archgap.index.options import IndexOptions
    from archgap.probe.binary.fatbin import Progress


def scan(
    python: str | None = None,
    *,
    gpus: Sequence[str] = (),
    target: Target = LOCAL,
    env_from: str | None = None,
    root: str = "/",
    timeout: float = DEFAULT_TIMEOUT,
    progress: Progress | None = None,
    driver: str | None = None,
    strict: bool = False,
) -> ScanReport:
    """Scan an environment's native libraries and toolchains; judge each package on each GPU.

    ``target`` says where (this machine, an ssh host, a container...); ``env_from`` names the
    service's environment there (a PID or an env file). Raises ``ProbeError`` when no facts
    could be collected and ``UnknownGpu`` for an unknown GPU name. ``progress(done, total, path)``
    is told as native files are read (on this machine; a remote probe cannot tell).
    """
    resolve(gpus)  # a bad name fails before anything is probed
    check_driver(driver)
    from archgap.analysis.deep_plan import deep_search_plan
    from archgap.transport.local import interpreter_asked_ahead

    # A local probe of the shell's environment: the interpreter answers while the request is
    # built, and judging is prepared while a forked child collects the facts.
    local = target.is_local and not env_from
    with interpreter_asked_ahead(python, root, timeout) if local else nullcontext():
        request = probe_request(DEFAULT_SECTIONS, python, deep_plan=deep_search_plan(gpus))
    facts = probe_facts(target, request, timeout, root, env_from, progress, prepare_judging)
    env_problem = facts.errors.get("env_from")
    if env_problem:
        raise ProbeError(f"--env-from {env_from}: {env_problem}")
    report = judge(facts, gpus, driver=driver, strict=strict)
    return report if target.is_local else replace(report, target=target.name)


def scan_archives(
    targets: Sequence[str],
    *,
    gpus: Sequence[str] = (),
    driver: str | None = None,
    strict: bool = False,
    options: IndexOptions | None = None,
    env_from: str | None = None,
    root: str = "/",
) -> ScanReport:
    """Judge wheels and images before they are installed or deployed: wheel files, directories
    of them, URLs, requirements resolved from the user's indexes (``options``), container images
    (``oci:DIR[:TAG]``, ``docker-archive:FILE``, ``rootfs:DIR``; ``options.platform`` picks one
    of a multi-platform image). The same analysis as ``scan`` over the distributions and native
    members read from them; a JIT package (FlashInfer) is judged with this machine's toolchain
    (``env_from``: a service's environment instead of the shell's; system paths read under
    ``root``), ``unknown`` without one. A target that cannot be read is a problem in the
    report; ``ProbeError`` when none could be read at all."""
    from archgap.archives.wheel import archive_facts
    from archgap.image.read import image_facts
    from archgap.index.options import IndexOptions
    from archgap.orchestrate.archive_jit import any_jit_package, local_toolchain, with_jit
    from archgap.targets import mark_unverified, read_targets

    resolve(gpus)
    check_driver(driver)
    contents, fetched = read_targets(list(targets), options or IndexOptions())
    mark_unverified(contents, fetched)
    if not any(c.distributions for c in contents):
        problems = [f"{p.subject}: {p.reason}" for c in contents for p in c.problems]
        raise ProbeError("; ".join(problems) or "no wheel")
    facts = archive_facts(contents, "")
    facts = replace(facts, sections={**facts.sections, "images": image_facts(contents)})
    report = judge(facts, gpus, driver=driver, strict=strict)
    if not any_jit_package([d.name for c in contents for d in c.distributions]):
        return report
    return with_jit(report, *local_toolchain(env_from, root), driver)


def report_from_facts(
    facts: Mapping[str, Any] | ProbeResponse,
    *,
    gpus: Sequence[str] = (),
    matrix: bool = True,
    driver: str | None = None,
    strict: bool = False,
) -> ScanReport:
    """Judge probe facts from any host: the JSON the probe printed (decoded here, once) or a
    ``ProbeResponse``. Raises ``archgap.codec.DecodeError`` for JSON without the probe's shape and
    ``UnknownGpu`` for a GPU name no table knows."""
    from archgap.codec import decode

    response = facts if isinstance(facts, ProbeResponse) else decode(ProbeResponse, facts)
    return judge(response, gpus, matrix, driver, strict)
