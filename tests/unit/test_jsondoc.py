"""The JSON writer of every command (report/jsondoc.py): the bytes ``json.dumps(doc, indent=2)``
writes, the standard library being the reference."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from archgap.codec import encode
from archgap.probe.binary.binfiles import walk_binaries
from archgap.report.jsondoc import document, dumps, write
from tests.helpers import CUDA_BIN

PLAIN = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
JSON = st.recursive(
    PLAIN,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=5), inner, max_size=4)
        | st.dictionaries(st.integers() | st.booleans() | st.none(), inner, max_size=3)
    ),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(JSON)
def test_any_json_value_is_written_as_json_dumps_with_indent_2_writes_it(value: Any) -> None:
    # floats include nan and inf (NaN, Infinity, as json writes them); keys that are not
    # strings are converted by json, and tuples are arrays
    assert dumps(value) == json.dumps(value, indent=2)


def test_a_kernels_document_of_every_fixture_is_written_as_json_writes_it() -> None:
    files = list(walk_binaries([str(CUDA_BIN)], deep=True))
    doc = document("kernels", {"files": files})
    # encode gives what asdict gives, tuples as lists (as JSON has them)
    assert doc["files"] == json.loads(json.dumps([asdict(f) for f in files]))
    assert dumps(doc) == json.dumps(doc, indent=2)
    assert encode(files[0].entries[0]) == asdict(files[0].entries[0])


class _Writes:
    """A text stream that keeps each write."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return len(text)


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_write_writes_what_json_dumps_with_indent_2_writes_and_a_newline(value: Any) -> None:
    stream = _Writes()
    write(value, stream)
    assert "".join(stream.parts) == json.dumps(value, indent=2) + "\n"


class _Hosts(list[dict[str, Any]]):
    """A list that records how far it has been read (the hosts of a fleet document)."""

    read = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for index, host in enumerate(list.__iter__(self)):
            self.read = max(self.read, index + 1)
            yield host


def test_a_long_document_is_written_while_it_is_read_not_built_whole_first() -> None:
    # A fleet of 50,000 hosts is 100 MB of JSON: write() hands the stream its text as the
    # members are written, so neither the text nor the list of its parts is ever whole (how
    # many hosts had been read at each write: the first comes before the last host is read).
    hosts = _Hosts({"name": f"gpu{i:05d}", "gpus": ["8.0 NVIDIA A100 ×8"]} for i in range(20000))
    read_at: list[int] = []

    class Stream(_Writes):
        def write(self, text: str) -> int:
            read_at.append(hosts.read)
            return super().write(text)

    stream = Stream()
    write({"hosts": hosts}, stream)
    assert "".join(stream.parts) == json.dumps({"hosts": list(hosts)}, indent=2) + "\n"
    assert 0 < read_at[0] < len(hosts)
    whole = sum(map(len, stream.parts))
    assert len(stream.parts) > 10 and max(map(len, stream.parts)) < whole / 10
