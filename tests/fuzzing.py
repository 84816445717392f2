"""Mutation fuzzing shared by the suite (a fixed amount of work) and bench/fuzz_campaign.py (the
long campaign): mutated real binaries for the fatbin reader, mutated facts documents for the
fleet report, and the checks every result must pass.

Deterministic: a case is (seed, index); the same pair always gives the same bytes, so any failure
is reproduced with ``binary_case(seed, index)`` or ``fleet_case(seed, index)``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from archgap.probe.facts import BinaryFacts

BIN = Path(__file__).resolve().parent / "fixtures" / "cuda" / "bin"
# Real nvcc 13.0 builds (tests/fixtures/cuda/build.sh): shared objects, archives, objects,
# loose cubins and fatbins, compressed (zstd, lz4) and not, with hidden (deep) device code.
SOURCES = (
    "libmix.so", "librdc.a", "k.fatbin", "k_sm120f.cubin", "libhidden.so", "rdc_a.o",
    "libcomp_default.so", "libcomp_speed.so", "libdebug.so", "libplain.a", "exe_two",
)  # fmt: skip
MAX_EXPANSION = 1 << 16  # no compressor expands a payload more (fatcontainer.MAX_EXPANSION)
INTERESTING = (0, 1, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 2**63 - 1, 2**64 - 1)


def sources() -> dict[str, bytes]:
    return {name: (BIN / name).read_bytes() for name in SOURCES}


def _spot(rng: random.Random, size: int) -> int:
    """Where the parsers look: the headers, the section table at the end, or anywhere."""
    pick = rng.random()
    if pick < 0.3:
        return rng.randrange(min(size, 128))
    if pick < 0.6:
        return rng.randrange(max(0, size - 4096), size)
    return rng.randrange(size)


def mutate_binary(rng: random.Random, data: bytes) -> bytes:
    """Byte flips, interesting integers (sizes, offsets, counts), copied blocks, a cut."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 16)):
        size = len(out)
        if size < 16:
            break
        at = _spot(rng, size - 8)
        kind = rng.random()
        if kind < 0.45:
            out[at] = rng.randrange(256)
        elif kind < 0.8:
            width = rng.choice((2, 4, 8))
            value = rng.choice(INTERESTING) & ((1 << (8 * width)) - 1)
            out[at : at + width] = value.to_bytes(width, "little")
        else:  # a block copied elsewhere: duplicated headers, tables pointing at one region
            length = rng.randint(1, 256)
            source = rng.randrange(max(1, size - length))
            out[at : at + length] = out[source : source + length]
    if rng.random() < 0.15:
        del out[rng.randrange(len(out)) :]
    return bytes(out)


def binary_case(seed: int, index: int, originals: dict[str, bytes]) -> tuple[str, bytes, bool]:
    """(file name, bytes, deep) of case ``index``."""
    rng = random.Random(seed * 1_000_003 + index)
    name = rng.choice(sorted(originals))
    return name, mutate_binary(rng, originals[name]), rng.random() < 0.5


def binary_violations(facts: BinaryFacts, size: int) -> list[str]:
    """What a result of read_binary on a regular, readable file of ``size`` bytes must never
    show: a reader exception turned into a row, or an entry whose sizes cannot be."""
    found: list[str] = []
    if facts.format == "unreadable":
        found.append(f"exception: {facts.error}")
    if facts.size != size:
        found.append(f"size {facts.size} != {size}")
    if len(facts.entries) > max(1, size // 64):  # an entry header is 64 bytes at least
        found.append(f"{len(facts.entries)} entries in {size} bytes")
    for entry in facts.entries:
        if not 0 <= entry.offset < size or not 0 <= entry.stored_size <= size:
            found.append(f"entry at {entry.offset} stores {entry.stored_size} of {size} bytes")
        if entry.uncompressed_size > max(entry.stored_size, 1) * MAX_EXPANSION:
            found.append(f"{entry.stored_size} bytes unpack to {entry.uncompressed_size}")
    return found


# -- fleet documents ------------------------------------------------------------------------

_ODD_VALUES: tuple[Callable[[random.Random], Any], ...] = (
    lambda r: None,
    lambda r: r.randint(-(2**70), 2**70),
    lambda r: r.random() * 1e308,
    lambda r: "x" * r.randint(0, 300),
    lambda r: [],
    lambda r: {},
    lambda r: [1, "a", None],
    lambda r: {"": {"": []}},
    lambda r: True,
    lambda r: "\x1b]0;title\x07\n\r\x00",
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths (keys and indices) into a JSON value, containers first, at most 12 deep (a
    grafted 5,000-deep nest is a leaf here)."""
    found = [prefix]
    if len(prefix) >= 12:
        return found
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value[:20]):
            found += _paths(child, (*prefix, i))
    return found


def _nested(rng: random.Random) -> Any:
    value: Any = rng.choice(([], {}, "x", 1))
    for _ in range(rng.choice((50, 500, 5000))):
        value = [value] if rng.random() < 0.5 else {"a": value}
    return value


def mutate_document(rng: random.Random, doc: dict[str, Any]) -> dict[str, Any]:
    """Values replaced by values of other types, keys dropped, deep nesting grafted in."""
    out: dict[str, Any] = json.loads(json.dumps(doc))
    for _ in range(rng.randint(1, 6)):
        paths = [p for p in _paths(out) if p]
        if not paths:
            break
        path = rng.choice(paths)
        parent = out
        for key in path[:-1]:
            parent = parent[key]
        pick = rng.random()
        if pick < 0.15 and isinstance(parent, dict):
            del parent[path[-1]]
        elif pick < 0.25:
            parent[path[-1]] = _nested(rng)
        else:
            parent[path[-1]] = rng.choice(_ODD_VALUES)(rng)
    return out


def fleet_case(seed: int, index: int, doc: dict[str, Any]) -> dict[str, Any]:
    return mutate_document(random.Random(seed * 1_000_003 + index), doc)
