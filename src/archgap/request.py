"""Probe requests: what a command asks the probe for, the same for every host and engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# What `archgap scan`, `probe` and `fleet` collect by default.
DEFAULT_SECTIONS = ("gpu", "python", "toolchains", "binaries", "caches")


class UnknownSection(ValueError):
    """A section name the probe does not have."""


def probe_request(
    sections: Sequence[str] = DEFAULT_SECTIONS,
    python: str | None = None,
    judged: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The request for these sections of the environment of ``python`` (None: the probe's own).

    ``judged``: the GPUs a scan names (``--gpu``/``--require``; () for none): the binaries of
    the environment are then searched deeply only where hidden entries can change the verdicts
    on those, the present or the default GPUs (analysis/deep_plan.py). None: everywhere, for
    facts that may be judged against any GPU later (``archgap probe``, ``fleet --from``)."""
    from archgap.probe.collect import SECTIONS

    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        raise UnknownSection(f"unknown {', '.join(unknown)} (known: {', '.join(sorted(SECTIONS))})")
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
            # per kind of entry, not every entry (probe.summary): all that scan/fleet judge by.
            request[section] = (
                {"of_python": True, "deep": True, "detail": False} if "python" in sections else {}
            )
            if judged is not None and request[section]:
                from archgap.analysis.deep_plan import deep_search_plan

                request[section]["deep_plan"] = deep_search_plan(judged)
        else:
            request[section] = {}
    return request
