"""Probe requests: one builder for scan, probe and fleet."""

import pytest

from archgap.analysis.deep_plan import deep_search_plan
from archgap.request import UnknownSection, probe_request


def test_default_request_reads_the_environment_and_its_kernels_in_one_trip() -> None:
    request = probe_request(python="/srv/venv/bin/python")
    assert list(request) == ["gpu", "python", "toolchains", "binaries", "caches", "loader"]
    assert request["python"] == {"python": "/srv/venv/bin/python"}
    assert request["toolchains"]["python"] == "/srv/venv/bin/python"
    assert request["toolchains"]["source_checks"]  # the rules' lines to confirm on the target
    # One row per kind of entry (probe.binary.summary): what scan and fleet judge by.
    assert request["binaries"] == {"of_python": True, "deep": True, "detail": False}
    assert request["caches"] == {}  # the JIT caches of the environment's user (its HOME etc.)


def test_binaries_without_an_environment_read_nothing() -> None:
    assert probe_request(["gpu", "binaries"]) == {"gpu": {}, "binaries": {}}


def test_unknown_sections_are_refused() -> None:
    with pytest.raises(UnknownSection, match="unknown nope"):
        probe_request(["gpu", "nope"])


def test_a_scan_request_plans_where_to_search_deeply() -> None:
    # A scan names its GPUs (none: the present ones or the default matrix); `probe` and
    # `fleet --from` documents may be judged against any GPU later, so they carry no plan.
    request = probe_request(python="/srv/venv/bin/python", deep_plan=deep_search_plan(["H100"]))
    plan = request["binaries"]["deep_plan"]
    assert plan["named"] == ["9.0"]
    assert "sm_90" in plan["native"]["9.0"]
    assert "deep_plan" not in probe_request(python="/srv/venv/bin/python")["binaries"]
    no_python = probe_request(["gpu", "binaries"], deep_plan=deep_search_plan([]))
    assert no_python == {"gpu": {}, "binaries": {}}
