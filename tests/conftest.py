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
    report = outcome.get_result()
    if report.skipped and in_ci() and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true (a missing fixture or service): {reason}"
