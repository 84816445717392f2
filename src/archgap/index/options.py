"""Where requirements are resolved and for which target: a light module (no index, resolver or
image code imported), so a command can build the options at start-up and import the readers
only when a target needs them."""

from __future__ import annotations

from dataclasses import dataclass

URL_SCHEMES = ("http://", "https://", "file:")  # a target that is a wheel's or package's URL
ARCHIVE_SUFFIXES = (".whl", ".conda", ".tar.bz2")  # wheels and conda packages, by name


@dataclass(frozen=True)
class IndexOptions:
    """Where requirements are resolved, and for which interpreter and platform."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    python_version: str | None = None
    platform: str | None = None  # a wheel platform tag; images also take os/arch (linux/arm64)
    deps: bool = False  # resolve the requirements' dependency sets (pip without --no-deps)
    tls_verify: bool = True  # docker:// registries: False allows plain HTTP (skopeo's flag)
    timeout: float | None = None  # seconds per network request, its body included (net's 60)
    max_download: int | None = None  # bytes of one wheel downloaded whole (net's 4 GiB)
    trust_token_realm: bool = False  # registry credentials to an https token realm elsewhere
