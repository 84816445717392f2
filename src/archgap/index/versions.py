"""The released versions of a package as ``archgap versions`` walks them (``api.versions``
judges each like ``scan WHEEL --gpu``): every version and variant the user's indexes list for the
target interpreter and platform, newest first.

A *variant* is one version on one index: ``3.0`` and ``3.0+cu130`` (a local label) are two, and so
is the same ``2.0`` on PyPI and on a vendor's index when the files differ (same sha256: one
variant, from the first index). Each variant's wheel is the one pip would install on the target
(its best tag).

What a variant's wheel holds is kept once read (``read_variant``), named by the sha256 its index
gives, so a rerun reads no wheel again.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import tempfile
from collections.abc import Sequence
from typing import Any

from archgap import __version__
from archgap.archives.wheel import WheelContents
from archgap.codec import DecodeError, decode, encode
from archgap.index.fetch import Fetched, cache_dir
from archgap.index.resolve import PYPI, Candidate, IndexFile
from archgap.probe.facts import BinaryFacts, Distribution, Problem

READ_FORMAT = 2  # bumped when what is read of a wheel changes: older entries are read again


def variants(found: Sequence[Candidate], index_urls: Sequence[str]) -> list[Candidate]:
    """One wheel per (version, index), pip's best tag; newest first, then in index order; the
    same bytes on a later index (same sha256) left out."""
    best: dict[tuple[str, str], Candidate] = {}
    for c in found:
        key = (str(c.version), c.index)
        if key not in best or c.rank < best[key].rank:
            best[key] = c
    order = {url: i for i, url in enumerate(index_urls)}
    listed = sorted(best.values(), key=lambda c: order.get(c.index, len(order)))
    listed.sort(key=lambda c: c.version, reverse=True)  # stable: index order on a tie
    kept: list[Candidate] = []
    digests: set[tuple[str, str]] = set()
    for c in listed:
        if c.file.sha256 and (str(c.version), c.file.sha256) in digests:
            continue
        if c.file.sha256:
            digests.add((str(c.version), c.file.sha256))
        kept.append(c)
    return kept


def install_line(
    name: str, winner: Candidate, listed: Sequence[Candidate], index_urls: Sequence[str]
) -> str:
    """The pip command that installs exactly ``winner``'s wheel.

    ``NAME==V`` (``==3.0+cu130`` with its local label); ``NAME===V`` when a local variant of the
    same version exists (``==3.0`` would also match ``3.0+cu130``, and pip takes the highest);
    the wheel's URL when the same version has other files on another index (pip would choose
    between them by index order it does not promise). ``--index-url`` when the winner's index is
    the main one and not PyPI, ``--extra-index-url`` when it is another."""
    if any(c is not winner and c.version == winner.version for c in listed):
        return f"pip install {shlex.quote(f'{name} @ {winner.file.url}')}"
    shadowed = winner.version.local is None and any(
        c.version.public == winner.version.public and c.version.local is not None for c in listed
    )
    pin = f"{name}{'===' if shadowed else '=='}{winner.version}"
    options = ""
    if index_urls and winner.index == index_urls[0]:
        if winner.index.rstrip("/") != PYPI:
            options = f" --index-url {shlex.quote(winner.index)}"
    else:
        options = f" --extra-index-url {shlex.quote(winner.index)}"
    return f"pip install{options} {shlex.quote(pin)}"


def read_variant(file: IndexFile, fetched: list[Fetched]) -> WheelContents:
    """What the wheel holds: as read before, when its index gave a sha256 and the cache has it
    (``$XDG_CACHE_HOME/archgap/versions/SHA256.json``: nothing crosses the network), else read
    now (ranges where the server allows, ``index.read``) and kept."""
    from archgap.index.read import read_index_file

    path = _cache_file(file)
    cached = _load(path, file.url) if path else None
    if cached is not None:
        return cached
    contents = read_index_file(file, fetched)
    # what a read that met a problem (a request that failed, a member cut short) saw may differ
    # next time: only a clean read is kept
    clean = not contents.problems and not any(b.error for b in contents.binaries)
    if path and contents.distributions and clean:
        _store(path, contents)
    return contents


def _cache_file(file: IndexFile) -> str | None:
    digest = (file.sha256 or "").lower()
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        return None  # no sha256 from the index: nothing names the bytes
    return os.path.join(cache_dir("versions"), f"{digest}.json")


def _load(path: str, url: str) -> WheelContents | None:
    """The cached contents, if their entry is of this reader and of this URL (a mirror with the
    same bytes is read again, so that paths name where it is)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if doc.get("format") != [READ_FORMAT, __version__] or doc.get("label") != url:
            return None
        contents = WheelContents(url)
        contents.distributions = [decode(Distribution, d) for d in doc["distributions"]]
        contents.binaries = [decode(BinaryFacts, b) for b in doc["binaries"]]
        contents.unowned = [str(u) for u in doc["unowned"]]
        contents.problems = [decode(Problem, p) for p in doc["problems"]]
        contents.site_packages = [str(s) for s in doc["site_packages"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError, DecodeError):
        return None  # absent, or damaged: read the wheel again
    return contents


def _store(path: str, contents: WheelContents) -> None:
    """Kept atomically (a rename), so a reader never sees half an entry; a cache that cannot be
    written is no error (the next run reads the wheel again)."""
    doc: dict[str, Any] = {
        "format": [READ_FORMAT, __version__],
        "label": contents.label,
        "distributions": [encode(d) for d in contents.distributions],
        "binaries": [encode(b) for b in contents.binaries],
        "unowned": list(contents.unowned),
        "problems": [encode(p) for p in contents.problems],
        "site_packages": list(contents.site_packages),
    }
    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, part = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".part")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(doc, f)
            os.replace(part, path)
        except OSError:
            os.unlink(part)
