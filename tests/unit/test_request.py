"""Probe requests: one builder for scan, probe and fleet."""

import pytest

from archgap.request import UnknownSection, probe_request


def test_default_request_reads_the_environment_and_its_kernels_in_one_trip() -> None:
    request = probe_request(python="/srv/venv/bin/python")
    assert list(request) == ["gpu", "python", "toolchains", "binaries", "caches"]
    assert request["python"] == {"python": "/srv/venv/bin/python"}
    assert request["toolchains"]["python"] == "/srv/venv/bin/python"
    assert request["toolchains"]["source_checks"]  # the rules' lines to confirm on the target
    # One row per kind of entry (probe.summary): what scan and fleet judge by, not every entry.
    assert request["binaries"] == {"of_python": True, "deep": True, "detail": False}
    assert request["caches"] == {}  # the JIT caches of the environment's user (its HOME etc.)


def test_binaries_without_an_environment_read_nothing() -> None:
    assert probe_request(["gpu", "binaries"]) == {"gpu": {}, "binaries": {}}


def test_unknown_sections_are_refused() -> None:
    with pytest.raises(UnknownSection, match="unknown nope"):
        probe_request(["gpu", "nope"])
