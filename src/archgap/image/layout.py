"""Images on disk: an OCI image layout (``oci:DIR[:TAG]``) and a ``docker save`` tarball
(``docker-archive:FILE[:REF]``), the transport names skopeo uses.

An OCI layout is a directory with an ``oci-layout`` file, ``index.json`` and content-addressed
``blobs/ALG/HEX``; a tag is the ``org.opencontainers.image.ref.name`` annotation of an
index.json entry. A ``docker save`` tarball holds ``manifest.json`` (``Config``, ``Layers``,
``RepoTags``) and the files it names; its members are found by name in the tar, never on disk
(a member that is a symlink is followed inside the tar).

Both are data named by the user: a file is opened without blocking and read only when it is a
regular file (a FIFO, device or socket is refused at once: ``--timeout`` cannot end a blocked
``open``), and a layout's file is read only when its real path stays inside the layout (a link
out of DIR is refused with its reason, never followed).
"""

from __future__ import annotations

import json
import os
import re
import stat
import tarfile
from collections.abc import Mapping
from typing import IO, Any

from archgap.image import ARCHIVE_PREFIX, OCI_PREFIX
from archgap.image.source import (
    LAYER_TAR,
    MAX_JSON_BYTES,
    OCI_INDEX,
    REF_NAME,
    Blob,
    ImageError,
    ImageManifest,
    Platform,
    check_digest,
    parse_json,
    resolve,
    verified,
)

MAX_LINKS = 8  # symlinks between members of a docker save tarball followed at most
_HEX_NAME = re.compile(r"^(?:blobs/sha256/)?([0-9a-f]{64})(?:\.tar|\.json)?$")


def split_reference(text: str) -> tuple[str, str]:
    """``PATH[:REF]`` as skopeo splits it (at the first colon), unless the whole text is an
    existing path."""
    if os.path.exists(text) or ":" not in text:
        return text, ""
    path, _, ref = text.partition(":")
    return path, ref


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))  # fmt: skip


def open_regular(path: str) -> IO[bytes]:
    """``path`` opened for reading if it is a regular file; ``OSError`` naming what it is
    otherwise. Opened with O_NONBLOCK, so that a FIFO without a writer never blocks the open
    (the flag changes nothing for a regular file's reads), and checked with fstat before any
    read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a file")
            raise OSError(f"{kind}, not a regular file: not read")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _inside(directory: str, path: str) -> bool:
    """Whether ``path``, all its links resolved, is ``directory`` (resolved) or below it."""
    top = os.path.realpath(directory)
    return os.path.commonpath([top, os.path.realpath(path)]) == top


def _read_small(stream: IO[bytes], what: str) -> bytes:
    data = stream.read(MAX_JSON_BYTES + 1)
    if len(data) > MAX_JSON_BYTES:
        raise ImageError(f"{what}: over {MAX_JSON_BYTES >> 20} MiB, not an image's JSON")
    return data


class OciLayout:
    """``oci:DIR[:TAG]``: an OCI image layout directory."""

    def __init__(self, reference: str) -> None:
        self.directory, self.tag = split_reference(reference)
        self.label = OCI_PREFIX + reference

    def _path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def _open(self, name: str, what: str) -> IO[bytes]:
        path = self._path(name)
        if os.path.lexists(path) and not _inside(self.directory, path):
            raise ImageError(f"{self.label}: {name}: a link out of the layout: not followed")
        try:
            return open_regular(path)
        except OSError as exc:
            raise ImageError(f"{self.label}: {what}: {exc.strerror or exc}") from None

    def close(self) -> None:
        """Nothing is held open between calls."""

    def _blob_path(self, blob: Blob) -> str:
        algorithm, _, hexdigest = blob.digest.partition(":")
        return os.path.join("blobs", algorithm, hexdigest)

    def read(self, blob: Blob) -> bytes:
        """A small blob (a manifest, an index, a config), checked against its descriptor."""
        what = f"{self.label}: blob {blob.digest}"
        with self._open(self._blob_path(blob), f"missing blob {blob.digest}") as stream:
            return check_digest(_read_small(stream, what), blob, what)

    def open_blob(self, blob: Blob) -> IO[bytes]:
        stream = self._open(self._blob_path(blob), f"missing blob {blob.digest}")
        return verified(stream, blob, f"blob {blob.digest}")

    def manifest(self, platform: Platform | None) -> ImageManifest:
        if not os.path.isdir(self.directory):
            raise ImageError(f"{self.label}: {self.directory} is not a directory")
        if not os.path.isfile(self._path("oci-layout")):
            raise ImageError(f"{self.label}: not an OCI image layout (no oci-layout file)")
        with self._open("index.json", "no index.json") as stream:
            top = _read_small(stream, f"{self.label}: index.json")
        index = parse_json(top, f"{self.label}: index.json")
        chosen = self._tagged(index)
        label = self.label if platform is None else f"{self.label} ({platform})"
        return resolve(chosen, OCI_INDEX, self.read, platform, label)

    def _tagged(self, index: Mapping[str, Any]) -> bytes:
        """The index the tag selects: index.json itself without a tag (one image, or the
        platforms of one), else an index of the entries annotated with the tag."""
        entries = index.get("manifests")
        if not isinstance(entries, list):
            raise ImageError(f"{self.label}: index.json has no manifests list")
        names = [_ref_name(e) for e in entries]
        if not self.tag:
            tags = sorted({n for n in names if n})
            if len(tags) > 1:
                raise ImageError(f"{self.label}: several images, name one: {', '.join(tags)}")
            return _index_of(entries)
        picked = [e for e, name in zip(entries, names, strict=True) if name == self.tag]
        if not picked:
            known = ", ".join(sorted({n for n in names if n})) or "none"
            raise ImageError(f"{self.label}: no image tagged {self.tag!r} (tags: {known})")
        return _index_of(picked)


def _ref_name(entry: Any) -> str:
    annotations = entry.get("annotations") if isinstance(entry, dict) else None
    name = annotations.get(REF_NAME) if isinstance(annotations, dict) else None
    return name if isinstance(name, str) else ""


def _index_of(entries: list[Any]) -> bytes:
    """An index of these entries: resolving it picks the platform's (or the only) one, and
    follows it when it is an index itself."""
    return json.dumps({"mediaType": OCI_INDEX, "manifests": entries}).encode()


class DockerArchive:
    """``docker-archive:FILE[:REF]``: a tarball written by ``docker save`` or skopeo."""

    def __init__(self, reference: str) -> None:
        self.path, self.ref = split_reference(reference)
        self.label = ARCHIVE_PREFIX + reference
        self._tar: tarfile.TarFile | None = None
        self._file: IO[bytes] | None = None
        self._members: dict[str, tarfile.TarInfo] = {}

    def _open_tar(self) -> tarfile.TarFile:
        if self._tar is None:
            try:
                self._file = open_regular(self.path)
            except OSError as exc:
                raise ImageError(
                    f"{self.label}: not a readable tar: {exc.strerror or exc}"
                ) from None
            try:
                self._tar = tarfile.open(fileobj=self._file, mode="r:")  # noqa: SIM115 (close())
                self._members = {
                    os.path.normpath(m.name): m for m in self._tar.getmembers() if m.name
                }
            except (OSError, tarfile.TarError, EOFError) as exc:
                self.close()
                raise ImageError(f"{self.label}: not a readable tar: {exc}") from None
        return self._tar

    def _member(self, name: str) -> tarfile.TarInfo:
        """The regular member ``name`` (symlinks followed inside the tar, never on disk)."""
        self._open_tar()
        current = os.path.normpath(name)
        for _ in range(MAX_LINKS):
            member = self._members.get(current)
            if member is None:
                raise ImageError(f"{self.label}: no member {name}")
            if member.isfile():
                return member
            if not member.issym():
                raise ImageError(f"{self.label}: {name} is not a file")
            current = os.path.normpath(os.path.join(os.path.dirname(current), member.linkname))
        raise ImageError(f"{self.label}: {name}: more than {MAX_LINKS} links (a loop?)")

    def _stream(self, member: tarfile.TarInfo) -> IO[bytes]:
        stream = self._open_tar().extractfile(member)
        if stream is None:
            raise ImageError(f"{self.label}: {member.name} cannot be read")
        return stream

    def _blob(self, name: str, media_type: str) -> Blob:
        member = self._member(name)
        named = _HEX_NAME.match(member.name) or _HEX_NAME.match(os.path.normpath(name))
        digest = "sha256:" + named.group(1) if named else ""
        return Blob(digest, media_type, member.size, member.name)

    def open_blob(self, blob: Blob) -> IO[bytes]:
        member = self._member(blob.location)
        return verified(self._stream(member), blob, blob.location)

    def manifest(self, platform: Platform | None) -> ImageManifest:
        with self._stream(self._member("manifest.json")) as stream:
            entries = _json_list(_read_small(stream, f"{self.label}: manifest.json"), self.label)
        entry = self._entry(entries)
        config_name, layer_names = entry.get("Config"), entry.get("Layers")
        if not isinstance(config_name, str) or not isinstance(layer_names, list):
            raise ImageError(f"{self.label}: manifest.json: an entry without Config and Layers")
        if not all(isinstance(n, str) for n in layer_names):
            raise ImageError(f"{self.label}: manifest.json: Layers are not file names")
        config_blob = self._blob(config_name, "application/vnd.docker.container.image.v1+json")
        with self._stream(self._member(config_name)) as stream:
            data = _read_small(stream, f"{self.label}: {config_name}")
        config = parse_json(check_digest(data, config_blob, f"{self.label}: {config_name}"), "")
        layers = tuple(self._blob(name, LAYER_TAR) for name in layer_names)
        image = ImageManifest(self.label, "", config, layers)
        if platform is not None and not platform.accepts(image.platform):
            raise ImageError(f"{self.label}: the image is {image.platform}, not {platform}")
        return image

    def _entry(self, entries: list[dict[str, Any]]) -> dict[str, Any]:
        if self.ref:
            wanted = {self.ref, _docker_name(self.ref)}
            for entry in entries:
                if wanted & set(entry.get("RepoTags") or []):
                    return entry
            raise ImageError(f"{self.label}: no image tagged {self.ref!r}")
        if len(entries) != 1:
            tags = sorted(str(t) for e in entries for t in e.get("RepoTags") or [])
            raise ImageError(f"{self.label}: {len(entries)} images, name one: {', '.join(tags)}")
        return entries[0]

    def close(self) -> None:
        if self._tar is not None:
            self._tar.close()
            self._tar = None
        if self._file is not None:  # tarfile leaves a file it was given open
            self._file.close()
            self._file = None


def _docker_name(ref: str) -> str:
    """``img:1`` as docker and skopeo write it in RepoTags: ``docker.io/library/img:1``."""
    first = ref.split("/", 1)[0]
    if "/" in ref and ("." in first or ":" in first or first == "localhost"):
        return ref  # names its registry already
    return "docker.io/" + (ref if "/" in ref else "library/" + ref)


def _json_list(data: bytes, label: str) -> list[dict[str, Any]]:
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ImageError(f"{label}: manifest.json is not JSON: {exc}") from None
    if not isinstance(doc, list) or not all(isinstance(e, dict) for e in doc) or not doc:
        raise ImageError(f"{label}: manifest.json is not a list of images")
    return doc
