"""The released versions of a package as ``archgap versions`` walks them (``api.versions``
judges each like ``scan WHEEL --gpu``): every version and variant the user's indexes list for the
target interpreter and platform, newest first.

A *variant* is one version on one index: ``3.0`` and ``3.0+cu130`` (a local label) are two, and so
is the same ``2.0`` on PyPI and on a vendor's index when the files differ (same sha256: one
variant, from the first index). Each variant's wheel is the one pip would install on the target
(its best tag).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from archgap.index.resolve import PYPI, Candidate


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
