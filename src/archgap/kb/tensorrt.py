"""TensorRT's GPU support per release (tensorrt.json) as typed data."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from archgap.kb import load_json


@dataclass(frozen=True)
class TensorrtSupport:
    compute_capability: str  # "8.9"
    first: str | None  # the first TensorRT release known to build engines for it
    last: str | None  # the last one, for a capability a later release dropped
    source: str


@cache
def tensorrt_support() -> dict[str, TensorrtSupport]:
    """Compute capability -> what is known of TensorRT's support for it."""
    return {
        e["compute_capability"]: TensorrtSupport(
            e["compute_capability"], e.get("first"), e.get("last"), e["source"]
        )
        for e in load_json("tensorrt.json")["support"]
    }


@dataclass(frozen=True)
class TensorrtOnJetson:
    text: str  # where a Jetson's TensorRT comes from
    source: str


@cache
def tensorrt_on_jetson() -> TensorrtOnJetson:
    """How TensorRT reaches a Jetson: with the board's JetPack, not as another platform's build."""
    entry = load_json("tensorrt.json")["jetson"]
    return TensorrtOnJetson(entry["text"], entry["source"])
