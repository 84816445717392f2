"""Decoding probe JSON back into the facts: the same values, strict about shape, cheap per object.

The documents are the probe's own output for the fixture binaries built by
tests/fixtures/cuda/build.sh, sent through JSON as a transport hands them over.
"""

from __future__ import annotations

import json
import typing
from dataclasses import asdict
from typing import Any

import pytest

from archgap import codec
from archgap.codec import DecodeError, decode
from archgap.probe.binary.binfiles import walk_binaries
from archgap.probe.facts import BinaryFacts, KernelEntry, PythonEnvironment
from tests.helpers import CUDA_BIN


def wire(value: Any) -> Any:
    return json.loads(json.dumps(asdict(value)))


def fixture_binaries() -> list[BinaryFacts]:
    found = list(walk_binaries([str(CUDA_BIN)], deep=True))
    assert sum(len(b.entries) for b in found) > 50  # build.sh builds dozens of entries
    return found


def test_round_trip_gives_equal_facts() -> None:
    for facts in fixture_binaries():
        assert decode(BinaryFacts, wire(facts)) == facts


def test_old_documents_without_optional_fields_decode() -> None:
    # A document from before KernelEntry.member existed: the default fills it.
    facts = next(b for b in fixture_binaries() if b.entries)
    data = wire(facts)
    for entry in data["entries"]:
        del entry["member"]
    decoded = decode(BinaryFacts, data)
    assert decoded.entries[0].member is None
    assert [e.target for e in decoded.entries] == [e.target for e in facts.entries]


ENTRY: dict[str, Any] = {
    "kind": "sass", "arch": 90, "variant": "a", "ptx_isa": None, "compression": "none",
    "stored_size": 10, "uncompressed_size": 10, "section": ".nv_fatbin", "offset": 64,
    "debug": False, "listed": True, "member": None,
}  # fmt: skip


NO = object()  # a field left out


def binary(*entries: Any, **fields: Any) -> dict[str, Any]:
    items = [{k: v for k, v in e.items() if v is not NO} if isinstance(e, dict) else e
             for e in entries]  # fmt: skip
    return {"path": "/x.so", "size": 1, "format": "elf", "entries": items, "deep": False, **fields}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "BinaryFacts: expected an object"),
        (binary(size=True), "BinaryFacts.size: expected int, got bool"),
        (binary(ENTRY, {**ENTRY, "arch": "9"}), "BinaryFacts.entries[1].arch: expected int"),
        (binary({**ENTRY, "ptx_isa": 9}), "BinaryFacts.entries[0].ptx_isa: no variant of"),
        (binary(entries={}), "BinaryFacts.entries: expected an array"),
        (binary({**ENTRY, "arch": NO}), "BinaryFacts.entries[0]: missing 'arch'"),
        (binary(ENTRY, ENTRY, 7), "BinaryFacts.entries[2]: expected an object"),
        (binary(error=5), "BinaryFacts.error: no variant of"),
        # Closed sets (the Literal types of probe.facts): a value outside one is named.
        (binary(format="exe"), "BinaryFacts.format: expected one of"),
        (binary(ENTRY, {**ENTRY, "kind": "cubin"}), "BinaryFacts.entries[1].kind: expected one of"),
        (binary({**ENTRY, "variant": "b"}), "BinaryFacts.entries[0].variant: expected one of"),
        (binary({**ENTRY, "compression": "gzip"}), "BinaryFacts.entries[0].compression: expected"),
    ],
)  # fmt: skip
def test_bad_documents_are_clear_errors(data: Any, message: str) -> None:
    # The same shape twice: the second time the decoders (and the shapes they know) are cached.
    for _ in range(2):
        with pytest.raises(DecodeError) as caught:
            decode(BinaryFacts, data)
        assert str(caught.value).startswith(message)


def test_a_good_shape_seen_first_does_not_let_a_bad_one_through() -> None:
    decode(BinaryFacts, binary(ENTRY))
    with pytest.raises(DecodeError, match=r"entries\[0\]\.debug: expected bool, got int"):
        decode(BinaryFacts, binary({**ENTRY, "debug": 1}))
    with pytest.raises(DecodeError, match=r"entries\[0\]\.stored_size: expected int, got float"):
        decode(BinaryFacts, binary({**ENTRY, "stored_size": 1.5}))
    # The same keys and value types as a good entry: only the value is outside the closed set.
    with pytest.raises(DecodeError, match=r"entries\[0\]\.kind: expected one of"):
        decode(BinaryFacts, binary({**ENTRY, "kind": "elf"}))


def test_nested_tuples_and_problems() -> None:
    data: dict[str, Any] = {
        "executable": "/usr/bin/python3", "python_version": "3.11.7", "site_packages": ["/s"],
        "distributions": [{"name": "torch", "version": "2.14.1", "dist_info": "/s/t.dist-info",
                           "native_files": ["/s/torch/lib/libtorch_cuda.so"]}],
        "unowned_native_files": [], "problems": [{"subject": "/s/x", "reason": "unreadable"}],
    }  # fmt: skip
    env = decode(PythonEnvironment, data)
    assert env.distributions[0].native_files == ("/s/torch/lib/libtorch_cuda.so",)
    assert env.problems[0].reason == "unreadable"
    data["distributions"][0]["native_files"] = ["/a", None]
    with pytest.raises(DecodeError, match=r"distributions\[0\]\.native_files\[1\]: expected str"):
        decode(PythonEnvironment, data)


def test_type_hints_are_read_once_per_class(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    real = typing.get_type_hints

    def counting(obj: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(obj)
        return real(obj, *args, **kwargs)

    monkeypatch.setattr(codec, "_DECODERS", {})
    monkeypatch.setattr(typing, "get_type_hints", counting)
    entries = [{**ENTRY, "offset": i} for i in range(2000)]
    decoded = [decode(BinaryFacts, binary(*entries)) for _ in range(3)]
    assert decoded[0].entries[1999] == KernelEntry(**{**ENTRY, "offset": 1999})
    assert sorted(c.__name__ for c in calls) == ["BinaryFacts", "KernelEntry", "RuntimeCompiler"]
