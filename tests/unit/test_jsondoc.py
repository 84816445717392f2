"""The JSON writer of every command (report/jsondoc.py): the bytes ``json.dumps(doc, indent=2)``
writes, the standard library being the reference."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from archgap.codec import encode
from archgap.probe.binary.binfiles import walk_binaries
from archgap.report.jsondoc import document, dumps
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
