"""Where an image comes from: one interface for every transport, and the JSON they share.

An ``ImageSource`` (an OCI layout, a ``docker save`` tarball, a registry) answers two questions:
the manifest for a platform (an index or a manifest list resolved to one image: its config and
its layers in order) and a blob's raw bytes as a stream. Everything else (layers, whiteouts,
Python environments, native files) is read the same way whatever the source (``read.py``).

The OCI/Docker JSON is parsed here once for all sources: media types, descriptors, platform
selection in an index (nested indexes followed), and digest checks. Every failure is an
``ImageError`` with a reason; the reader turns it into a problem value at its boundary.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO, Any, Protocol

from archgap.archives.platform import ELF_MACHINE as ELF_MACHINE
from archgap.archives.platform import Platform as Platform
from archgap.archives.platform import host_platform as host_platform
from archgap.archives.platform import parse_platform as parse_platform

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPES = frozenset((OCI_INDEX, DOCKER_LIST))
MANIFEST_TYPES = frozenset((OCI_MANIFEST, DOCKER_MANIFEST))
# Layer media types say how a layer is compressed; the reader also checks the bytes' magic.
LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"

MAX_JSON_BYTES = 4 << 20  # an index, a manifest or a config (real ones are a few KiB)
MAX_NESTING = 8  # indexes inside indexes followed at most
REF_NAME = "org.opencontainers.image.ref.name"
DIGEST = re.compile(r"^(sha256|sha512):([0-9a-f]{64}|[0-9a-f]{128})$")


class ImageError(Exception):
    """An image (or one of its parts) that cannot be read, and why."""


@dataclass(frozen=True)
class Blob:
    """A content descriptor: what the manifest says about one blob."""

    digest: str  # "sha256:..."; "" where the source has none (docker save's layer files)
    media_type: str
    size: int  # -1 where unknown
    location: str = ""  # where the source keeps it, when that is not its digest (a tar member)


@dataclass(frozen=True)
class ImageManifest:
    """One image: its config (the parsed JSON) and its layers, lowest first."""

    label: str  # what the user named, with the platform chosen: "oci:/x:v1 (linux/arm64)"
    digest: str  # the manifest's own digest ("" where the source gives none)
    config: Mapping[str, Any]
    layers: tuple[Blob, ...]

    @property
    def platform(self) -> Platform:
        """The platform the image's config declares."""
        return Platform(
            _text(self.config.get("os")),
            _text(self.config.get("architecture")),
            _text(self.config.get("variant")),
        )


class ImageSource(Protocol):
    """Where an image comes from: an OCI layout, a ``docker save`` tarball, a registry."""

    label: str  # the target as the user wrote it: "oci:/srv/layout:v1", "docker://nginx:1"

    def manifest(self, platform: Platform | None) -> ImageManifest:
        """The image for ``platform`` (None: this machine's); an index or a manifest list is
        resolved (``resolve``). Raises ``ImageError``."""
        ...

    def open_blob(self, blob: Blob) -> IO[bytes]:
        """The blob's raw (still compressed) bytes as a stream; a stream read to its end has
        been checked against the digest (``Verified``). Raises ``ImageError``."""
        ...

    def close(self) -> None:
        """Let go of what the source holds open (a tar file, connections)."""
        ...


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def parse_json(data: bytes, what: str) -> dict[str, Any]:
    """A JSON object (an index, a manifest, a config); ``ImageError`` for anything else."""
    if len(data) > MAX_JSON_BYTES:
        raise ImageError(f"{what}: over {MAX_JSON_BYTES >> 20} MiB, not an image's JSON")
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ImageError(f"{what}: not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ImageError(f"{what}: not a JSON object")
    return doc


def descriptor(data: Any, where: str) -> Blob:
    """A descriptor (``{"mediaType", "digest", "size"}``) checked: a digest we can verify and
    a non-negative size."""
    if not isinstance(data, dict):
        raise ImageError(f"{where}: not a descriptor")
    digest, size, media = data.get("digest"), data.get("size"), data.get("mediaType")
    if not isinstance(digest, str) or not DIGEST.match(digest):
        raise ImageError(f"{where}: digest {str(digest)[:80]!r} is not sha256:HEX or sha512:HEX")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ImageError(f"{where}: size {str(size)[:40]!r} is not a byte count")
    return Blob(digest, _text(media), size)


def _platform_of(entry: Mapping[str, Any]) -> Platform | None:
    p = entry.get("platform")
    if not isinstance(p, dict):
        return None
    return Platform(_text(p.get("os")), _text(p.get("architecture")), _text(p.get("variant")))


def choose(index: Mapping[str, Any], wanted: Platform, where: str) -> Blob:
    """The index entry for ``wanted``: the first whose platform accepts it, preferring one
    without a variant over a guess; an index of one entry without a platform is that entry.
    Attestations (``unknown/unknown``) are never chosen."""
    entries = index.get("manifests")
    if not isinstance(entries, list) or not entries:
        raise ImageError(f"{where}: an index without manifests")
    offered: list[str] = []
    for number, entry in enumerate(entries):
        offered_platform = _platform_of(entry) if isinstance(entry, dict) else None
        if offered_platform is None:
            if len(entries) == 1:
                return descriptor(entry, f"{where} manifests[0]")
            continue
        offered.append(str(offered_platform))
        if wanted.accepts(offered_platform):
            return descriptor(entry, f"{where} manifests[{number}]")
    listed = ", ".join(sorted(set(offered) - {"unknown/unknown"})) or "none"
    raise ImageError(f"{where}: no image for {wanted} (the index has: {listed})")


def check_digest(data: bytes, blob: Blob, what: str) -> bytes:
    """``data`` if it is the blob the descriptor names (size and digest), else ``ImageError``."""
    if blob.size >= 0 and len(data) != blob.size:
        raise ImageError(f"{what}: {len(data)} bytes, the descriptor says {blob.size}")
    if blob.digest:
        algorithm, _, expected = blob.digest.partition(":")
        if hashlib.new(algorithm, data).hexdigest() != expected:
            raise ImageError(f"{what}: content does not match its digest {blob.digest}")
    return data


def resolve(
    top: bytes,
    top_type: str,
    read: Callable[[Blob], bytes],
    wanted: Platform | None,
    label: str,
) -> ImageManifest:
    """Follow an index (or a manifest list) down to the manifest for ``wanted`` (None: this
    machine's platform) and read its config. ``top`` is the first document (an OCI layout's
    index.json, the manifest a registry answered for a tag) of media type ``top_type`` (used
    when the document does not say); ``read`` gives a referenced manifest's or config's bytes,
    already checked against the descriptor (``check_digest``)."""
    platform = wanted or host_platform()
    data, media, digest = top, top_type, ""
    for _ in range(MAX_NESTING):
        doc = parse_json(data, f"{label}: {digest or 'top document'}")
        media = _text(doc.get("mediaType")) or media
        if media in INDEX_TYPES or (not media and "manifests" in doc):
            chosen = choose(doc, platform, f"{label}: index {digest}".rstrip())
            data, media, digest = read(chosen), chosen.media_type, chosen.digest
            continue
        return _manifest(doc, read, label, digest, wanted)
    raise ImageError(f"{label}: indexes nested more than {MAX_NESTING} deep")


def _manifest(
    doc: Mapping[str, Any],
    read: Callable[[Blob], bytes],
    label: str,
    digest: str,
    wanted: Platform | None,
) -> ImageManifest:
    where = f"{label}: manifest {digest}".rstrip()
    layers = doc.get("layers")
    if not isinstance(layers, list):
        raise ImageError(f"{where}: no layers (not an image manifest)")
    config_blob = descriptor(doc.get("config"), f"{where} config")
    config = parse_json(read(config_blob), f"{label}: config {config_blob.digest}")
    found = tuple(descriptor(layer, f"{where} layers[{i}]") for i, layer in enumerate(layers))
    image = ImageManifest(label, digest, config, found)
    # one image without an index: judged whatever its platform, unless another was asked for
    if wanted is not None and image.platform.architecture and not wanted.accepts(image.platform):
        raise ImageError(f"{label}: the image is {image.platform}, not {wanted}")
    return image


class Verified(io.RawIOBase):
    """A blob's stream that hashes what is read and, at its end, checks the size and digest the
    descriptor gives: a layer read to its end was the layer the manifest names."""

    def __init__(self, raw: IO[bytes], blob: Blob, what: str) -> None:
        super().__init__()
        self._raw = raw
        self._blob = blob
        self._what = what
        self._seen = 0
        algorithm = blob.digest.partition(":")[0]
        self._hash = hashlib.new(algorithm) if blob.digest else None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self._raw.read(len(view))
        if not data:
            self._finish()
            return 0
        view[: len(data)] = data
        self._seen += len(data)
        if self._hash is not None:
            self._hash.update(data)
        return len(data)

    def _finish(self) -> None:
        blob = self._blob
        if blob.size >= 0 and self._seen != blob.size:
            raise ImageError(f"{self._what}: {self._seen} bytes, the descriptor says {blob.size}")
        if self._hash is not None and self._hash.hexdigest() != blob.digest.partition(":")[2]:
            raise ImageError(f"{self._what}: content does not match its digest {blob.digest}")

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


def verified(raw: IO[bytes], blob: Blob, what: str) -> IO[bytes]:
    """``raw`` (a blob's bytes) buffered, checked against ``blob`` when read to its end."""
    return io.BufferedReader(Verified(raw, blob, what), 1 << 16)


__all__ = [
    "Blob",
    "ImageError",
    "ImageManifest",
    "ImageSource",
    "Platform",
    "Verified",
    "check_digest",
    "choose",
    "descriptor",
    "host_platform",
    "parse_json",
    "parse_platform",
    "resolve",
    "verified",
]
