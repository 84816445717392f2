"""Run-time compilers found by content, and how packages use them: ``runtime_compilers.json``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from archgap.kb import load_json


@dataclass(frozen=True)
class CompilerMarkers:
    """The strings that prove a compiler, and the patterns of its tables (regular expressions
    over bytes, as probe.binary.rtcompilers uses them)."""

    kind: str  # "nvrtc", "nvptx"
    what: str
    mark: bytes  # a literal
    targets: bytes  # a pattern
    version: bytes  # a pattern: NVRTC's release banner; NVPTX's PTX ISA table
    source: str


@dataclass(frozen=True)
class PackageCompiler:
    """A package documented to compile at run time with a compiler it carries."""

    package: str
    compiler: str
    newer_gpu: str  # what it does on a GPU newer than the compiler's newest target
    source: str
    own_target_only: bool = False  # it asks for the GPU's own target, never an older one


@dataclass(frozen=True)
class Rule:
    rule: str
    source: str


def _bytes(text: str) -> bytes:
    """A literal written with \\x escapes in JSON."""
    return text.encode("latin-1").decode("unicode_escape").encode("latin-1")


@cache
def compiler_markers() -> tuple[CompilerMarkers, ...]:
    data = load_json("runtime_compilers.json")["markers"]
    return tuple(
        CompilerMarkers(
            kind,
            m["what"],
            _bytes(m["mark"]),
            m["targets"].encode(),
            (m.get("release") or m["ptx_isa"]).encode(),
            m["source"],
        )
        for kind, m in data.items()
    )


@cache
def package_compilers() -> dict[str, PackageCompiler]:
    entries = load_json("runtime_compilers.json")["packages"]
    return {
        e["package"]: PackageCompiler(
            e["package"],
            e["compiler"],
            e["newer_gpu"],
            e["source"],
            bool(e.get("own_target_only", False)),
        )
        for e in entries
    }


@cache
def no_row() -> tuple[tuple[str, Rule], ...]:
    """(distribution-name prefix, why) of packages that carry a compiler but get no row here:
    the compiler's own distribution, or a package another JIT model judges."""
    entries = load_json("runtime_compilers.json")["no_row"]
    return tuple((e["prefix"], Rule(e["why"], e["source"])) for e in entries)


@cache
def ptx_jit_rule() -> Rule:
    rule = load_json("runtime_compilers.json")["ptx_jit"]
    return Rule(rule["rule"], rule["source"])
