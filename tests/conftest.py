"""Under CI a skipped test is a failure: missing test data or a service that did not start must not
let the run pass quietly. Locally, skips stay skips (with their reason), so a partial setup works.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, None]:
    outcome = yield
    _fail_a_skip_in_ci(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, None]:
    """A module skipped as a whole (``pytest.skip(allow_module_level=True)``, ``importorskip``
    at import) is reported at collection, not as a test: it fails under CI the same way."""
    outcome = yield
    _fail_a_skip_in_ci(outcome.get_result())


def _fail_a_skip_in_ci(report: pytest.TestReport | pytest.CollectReport) -> None:
    if report.skipped and in_ci() and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true (a missing fixture or service): {reason}"


def _archgap_descendants() -> list[str]:
    """Processes below this pytest process that belong to archgap (its command line names
    archgap, or it carries the ARCHGAP_RUN mark of a command archgap started), still running."""
    from archgap.probe.environment.system import descendants

    found = []
    for pid in sorted(descendants(os.getpid())):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ")
            with open(f"/proc/{pid}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        if b"archgap" in cmdline or b"ARCHGAP_RUN=" in environ:
            found.append(f"{pid}: {cmdline.decode(errors='replace')[:160]}")
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """After the suite no archgap process may be left running (a timeout must reach them all)."""
    import time

    deadline = time.monotonic() + 5  # what is being killed right now gets a moment to go
    left = _archgap_descendants()
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = _archgap_descendants()
    if left:
        print("\narchgap processes left running after the suite:\n  " + "\n  ".join(left))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
