"""The GPU architectures a wheel variant declares (PEP 817 "Wheel Variants: Beyond Platform
Tags"), for ``kernels --require claimed``.

A variant wheel carries ``*.dist-info/variant.json`` (PEP 817, "*.dist-info/variant.json: the
packaged variant metadata file"): a ``variants`` object "listing exactly one variant - the
variant provided by the wheel", ``{label: {namespace: {feature: [values]}}}``. A property is
``namespace :: feature :: value``; the ``nvidia`` namespace's ``sm_arch`` feature is multi-value
(PEP 817's example: ``nvidia :: sm_arch :: 120_real`` and ``110_real``), each value "compatible
with CMAKE flag 90_real" (the NVIDIA variant provider's README): CMake's CUDA_ARCHITECTURES item
``90-real`` (SASS sm_90), ``120-virtual`` (PTX compute_120). Each declared value is a promise the
wheel's kernels must keep, checked as that CMake item is (archgap.claims).

The file is data: read from the zip (never extracted, never run), at most ``MAX_BYTES``.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from collections.abc import Sequence
from typing import Any

from archgap.claims import Claim, NoClaim, VariantClaims, cmake_architectures
from archgap.errors import UsageError

MAX_BYTES = 1 << 20
NAMESPACE, FEATURE = "nvidia", "sm_arch"
_MEMBER = re.compile(r"^[^/]+\.dist-info/variant\.json$")
_LABEL = re.compile(r"^[0-9a-z._]{1,16}$")  # PEP 817: the variant label
_VALUE = re.compile(r"^([0-9]+[af]?)_(real|virtual)$")


def parse_variant(data: bytes, where: str) -> tuple[str, tuple[str, ...]] | None:
    """(label, sm_arch values) of a variant.json; None for a variant that declares no
    ``nvidia :: sm_arch`` (the null variant, a CPU-only variant). A file that breaks the PEP's
    structure is a ``UsageError`` naming why."""
    label, namespaces = _one_variant(data, where)
    features = namespaces.get(NAMESPACE) or {}
    values = features.get(FEATURE) if isinstance(features, dict) else None
    if values is None:
        return None
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise UsageError(f"{where}: variant {label}: {NAMESPACE} :: {FEATURE} is not a list")
    bad = [v for v in values if not _VALUE.match(v)]
    if bad:
        raise UsageError(
            f"{where}: variant {label}: {NAMESPACE} :: {FEATURE} :: {bad[0]!r} is not an "
            "architecture (90_real, 120_virtual)"
        )
    return label, tuple(values)


def _one_variant(data: bytes, where: str) -> tuple[str, dict[str, Any]]:
    """(label, namespaces) of the one variant a variant.json declares; a ``UsageError`` naming
    why where the file is not JSON or breaks the PEP's structure."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{where}: not JSON ({exc})") from None
    variants = doc.get("variants") if isinstance(doc, dict) else None
    if not isinstance(variants, dict) or len(variants) != 1:
        raise UsageError(f"{where}: 'variants' must list exactly one variant (PEP 817)")
    ((label, namespaces),) = variants.items()
    if not isinstance(label, str) or not _LABEL.match(label):
        raise UsageError(f"{where}: {label!r} is not a variant label (PEP 817: [0-9a-z._]{{1,16}})")
    if not isinstance(namespaces, dict):
        raise UsageError(f"{where}: variant {label}: not a table of namespaces")
    return label, namespaces


def claims_of(values: Sequence[str]) -> tuple[Claim, ...]:
    """The claims of sm_arch values: ``90_real`` is CMake's ``90-real``, and so on."""
    items = ";".join(v.replace("_", "-", 1) for v in values)
    try:
        return cmake_architectures(items, f"{NAMESPACE} :: {FEATURE}")
    except NoClaim:
        return ()


def read_variant(wheel: str) -> VariantClaims | None:
    """The declaration of a local wheel (None: no variant.json, or no sm_arch in it; a file
    that is no zip is left to the reading of its kernels, which reports it)."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            member = next((i for i in archive.infolist() if _MEMBER.match(i.filename)), None)
            if member is None:
                return None
            if member.file_size > MAX_BYTES:
                raise UsageError(f"{wheel}: {member.filename} over {MAX_BYTES >> 20} MiB")
            with archive.open(member) as handle:
                data = handle.read(MAX_BYTES + 1)
    except (OSError, zipfile.BadZipFile, EOFError, RuntimeError):
        return None
    found = parse_variant(data, f"{wheel}: {member.filename}")
    if found is None:
        return None
    label, values = found
    return VariantClaims(wheel, label, values, claims_of(values))


def local_wheels(paths: Sequence[str]) -> list[str]:
    """The wheels among ``paths`` and directly in the directories named (``dist/``)."""
    wheels: list[str] = []
    for path in paths:
        if path.endswith(".whl") and os.path.isfile(path):
            wheels.append(path)
        elif os.path.isdir(path):
            with os.scandir(path) as entries:
                names = sorted(e.name for e in entries if e.name.endswith(".whl") and e.is_file())
            wheels += [os.path.join(path, name) for name in names]
    return wheels


def variant_claims(paths: Sequence[str]) -> tuple[VariantClaims, ...]:
    """Each local variant wheel's declaration, in the order given."""
    found = (read_variant(wheel) for wheel in local_wheels(paths))
    return tuple(v for v in found if v is not None)
