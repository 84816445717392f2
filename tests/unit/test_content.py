"""Entry content: the LZ4 block format (https://github.com/lz4/lz4/blob/dev/doc/lz4_Block_format.md)
and the kernel directives (a cubin's .text section, PTX's .entry)."""

from __future__ import annotations

import importlib.abc
import sys

import pytest

from archgap.probe.binary import content
from archgap.probe.binary.content import has_kernel, lz4_block


def test_lz4_literals_matches_and_an_overlapping_match() -> None:
    # token 0x22: 2 literals "ab", then a match at offset 2 of 2 + 4 = 6 bytes, which overlaps
    # what it writes ("ababab"); token 0x30: the last sequence, 3 literals only.
    block = b"\x22ab\x02\x00" + b"\x30xyz"
    assert lz4_block(block, 11) == b"abababab" + b"xyz"
    # a literal length of 15 + 255 + 3 = 273 takes two extra bytes
    long = b"\xf0\xff\x03" + b"L" * 273
    assert lz4_block(long, 273) == b"L" * 273


def test_lz4_that_is_not_a_block_is_none() -> None:
    assert lz4_block(b"\x22ab\x05\x00", 8) is None  # offset 5 before the start
    assert lz4_block(b"\x22ab\x02\x00", 100) is None  # unpacks to another size than stated
    assert lz4_block(b"\xf0", 15) is None  # literal length past the end


def test_ptx_holds_a_kernel_when_it_has_an_entry_directive() -> None:
    kernel = b".version 9.0\n.target sm_75\n.visible .entry k(\n)\n{\nret;\n}\n"
    helper = b".version 9.0\n.target sm_75\n.func (.reg .b32 r) f(.reg .b32 x)\n{\nret;\n}\n"
    assert has_kernel(kernel, 0, len(kernel), len(kernel), "ptx", "none") is True
    assert has_kernel(helper, 0, len(helper), len(helper), "ptx", "none") is False
    # compressed in a way the probe cannot unpack: not known
    assert has_kernel(kernel, 0, len(kernel), len(kernel), "ptx", "unknown") is None


def test_the_zstandard_module_is_looked_for_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Python caches a module it found, never one it did not: before 3.14 every zstd entry
    # searched sys.path again (10,000 entries of a torch environment: 0.9 s).
    searched: list[str] = []

    class Counting(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: object = None, target: object = None) -> None:
            searched.append(name)

    monkeypatch.setattr(sys, "meta_path", [Counting(), *sys.meta_path])
    monkeypatch.delitem(sys.modules, "compression", raising=False)
    content._zstd.cache_clear()
    for _ in range(100):
        content.zstd_frame(b"\x28\xb5\x2f\xfd", 4)
    assert searched.count("compression") <= 1
