"""Probe requests: what a command asks the probe for, the same for every host and engine."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from archgap.errors import UsageError

# What `archgap scan`, `probe` and `fleet` collect by default.
DEFAULT_SECTIONS = ("gpu", "python", "toolchains", "binaries", "caches", "loader")


class UnknownSection(UsageError):
    """A section name the probe does not have (``--sections``)."""


def probe_request(
    sections: Sequence[str] = DEFAULT_SECTIONS,
    python: str | None = None,
    deep_plan: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The request for these sections of the environment of ``python`` (None: the probe's own).

    ``deep_plan``: where a scan searches the environment's binaries deeply (only where hidden
    entries can change the verdicts on the GPUs it judges: analysis.deep_plan). None:
    everywhere, for facts that may be judged against any GPU later (``archgap probe``,
    ``fleet --from``)."""
    from archgap.probe.collect import SECTIONS

    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        raise UnknownSection(
            f"--sections: unknown {', '.join(unknown)} (known: {', '.join(sorted(SECTIONS))})"
        )
    request: dict[str, Any] = {}
    for section in sections:
        if section == "python":
            request[section] = {"python": python}
        elif section == "toolchains":
            from archgap.kb.toolchain import all_source_checks

            # The installed source is checked where it is (the rules' raises really there?).
            request[section] = {"python": python, "source_checks": all_source_checks()}
        elif section == "binaries":
            # The kernels of the python section's environment, in the same round trip; one row
            # per kind of entry, not every entry (probe.binary.summary): all scan/fleet judge by.
            request[section] = (
                {"of_python": True, "deep": True, "detail": False} if "python" in sections else {}
            )
            if deep_plan is not None and request[section]:
                request[section]["deep_plan"] = dict(deep_plan)
        else:
            request[section] = {}
    return request


def binaries_request(paths: Sequence[str], deep: bool, detail: bool) -> dict[str, Any]:
    """The device code in named files and directories (``archgap kernels`` on a target):
    every entry with ``detail``, else one row per kind of entry."""
    return {"binaries": {"paths": list(paths), "deep": deep, "detail": detail}}


def trace_request(
    name: str, paths: Sequence[str] = (), dists: Sequence[str] = (), python: str | None = None
) -> dict[str, Any]:
    """Where ``name`` is written and read: in ``paths``, else in the distributions ``dists``,
    else in all of the site-packages of ``python``."""
    return {"trace": {"name": name, "paths": list(paths), "dists": list(dists), "python": python}}


def gates_request(
    dists: Sequence[str] = (), paths: Sequence[str] = (), python: str | None = None
) -> dict[str, Any]:
    """The architecture gates in ``paths``, else in ``dists``, else in all of site-packages."""
    return {"gates": {"dists": list(dists), "paths": list(paths), "python": python}}


def explain_request(python: str | None, code: dict[str, Any]) -> dict[str, Any]:
    """What explain examines in one round trip: the GPUs, the Python environment, its
    toolchains (with the rules' source checks) and the raise sites the log points at
    (``code``: what ``analysis.explain.match.code_request`` asks for)."""
    request = probe_request(("gpu", "python", "toolchains"), python)
    request["code"] = {"python": python, **code}
    return request


def verify_request(paths: Sequence[str], python: str | None) -> dict[str, Any]:
    """What verify loads: the device code of ``paths``, else of the environment of ``python``;
    every entry (each one is loaded), and the GPUs."""
    if paths:
        return {"gpu": {}, "binaries": {"paths": list(paths), "deep": True}}
    request = probe_request(("gpu", "python", "binaries"), python)
    request["binaries"]["detail"] = True
    return request


def load_request(
    libraries: Sequence[dict[str, Any]], gpu_indices: Sequence[int], gpu_timeout: float
) -> dict[str, Any]:
    """Load these libraries' chosen images through the CUDA driver on the GPUs (verify)."""
    params = {"libraries": libraries, "gpu_indices": list(gpu_indices), "timeout": gpu_timeout}
    return {"verify": params}
