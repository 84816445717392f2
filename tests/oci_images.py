"""OCI image layouts built by the tests from real material: layers are tars (gzip, zstd or plain)
of real files (the fixture binaries, a real wheel's members), with whiteouts and symlinks, written
as the OCI image-layout spec lays them out (oci-layout, index.json, blobs/sha256/HEX)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
SITE = "usr/local/lib/python3.12/site-packages"
WHEEL_FILE = (
    "Wheel-Version: 1.0\nGenerator: archgap-tests\nRoot-Is-Purelib: false\n"
    "Tag: py3-none-manylinux_2_28_x86_64\n"
)


def _metadata(name: str, version: str) -> str:
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n"


@dataclass(frozen=True)
class Symlink:
    target: str


@dataclass(frozen=True)
class Hardlink:
    target: str  # a member of the same layer


Member = Path | bytes | Symlink | Hardlink | None  # None: a directory


@dataclass
class Layer:
    files: Mapping[str, Member] = field(default_factory=dict)
    compression: str = "gzip"  # "gzip", "zstd", "none"
    raw: bytes | None = None  # the blob as given (a damaged layer, for bad-input tests)


@dataclass
class Image:
    layers: list[Layer]
    architecture: str = "amd64"
    os: str = "linux"


def tar_of(files: Mapping[str, Member]) -> bytes:
    """A layer's tar: members in the order given, as image tools write them (no leading /)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, content in files.items():
            info = tarfile.TarInfo(name.lstrip("/"))
            info.mtime = 1_700_000_000
            if content is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            elif isinstance(content, Symlink):
                info.type, info.linkname = tarfile.SYMTYPE, content.target
                tar.addfile(info)
            elif isinstance(content, Hardlink):
                info.type, info.linkname = tarfile.LNKTYPE, content.target.lstrip("/")
                tar.addfile(info)
            else:
                data = content.read_bytes() if isinstance(content, Path) else content
                info.size, info.mode = len(data), 0o755
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def compress(data: bytes, how: str) -> tuple[bytes, str]:
    if how == "gzip":
        return gzip.compress(data, compresslevel=1, mtime=0), "+gzip"
    if how == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=1).compress(data), "+zstd"
    return data, ""


class LayoutWriter:
    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
        (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')

    def blob(self, data: bytes, media_type: str) -> dict[str, object]:
        digest = hashlib.sha256(data).hexdigest()
        (self.root / "blobs" / "sha256" / digest).write_bytes(data)
        return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}

    def image(self, image: Image) -> dict[str, object]:
        layers, diff_ids = [], []
        for layer in image.layers:
            tar = tar_of(layer.files)
            diff_ids.append("sha256:" + hashlib.sha256(tar).hexdigest())
            data, suffix = compress(tar, layer.compression)
            if layer.raw is not None:
                data = layer.raw
            layers.append(self.blob(data, "application/vnd.oci.image.layer.v1.tar" + suffix))
        config = {
            "architecture": image.architecture,
            "os": image.os,
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
            "config": {"Env": ["PATH=/usr/local/bin:/usr/bin:/bin"]},
        }
        manifest = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": self.blob(json.dumps(config).encode(), OCI_CONFIG),
            "layers": layers,
        }
        descriptor = self.blob(json.dumps(manifest).encode(), OCI_MANIFEST)
        descriptor["platform"] = {"architecture": image.architecture, "os": image.os}
        return descriptor

    def index(self, manifests: list[dict[str, object]]) -> dict[str, object]:
        body = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}
        return self.blob(json.dumps(body).encode(), OCI_INDEX)

    def tag(self, tags: dict[str, dict[str, object]]) -> None:
        entries = []
        for name, descriptor in tags.items():
            entry = {k: v for k, v in descriptor.items() if k != "platform"}
            entry["annotations"] = {"org.opencontainers.image.ref.name": name}
            entries.append(entry)
        body = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}
        (self.root / "index.json").write_text(json.dumps(body))


def write_layout(root: Path, tags: dict[str, Image | list[Image]]) -> Path:
    """An OCI layout with these tags: one image, or a multi-arch index of several."""
    writer = LayoutWriter(root)
    described = {}
    for name, spec in tags.items():
        if isinstance(spec, list):
            described[name] = writer.index([writer.image(i) for i in spec])
        else:
            described[name] = writer.image(spec)
    writer.tag(described)
    return root


def wheel_files(wheel: Path, site: str = SITE) -> dict[str, Member]:
    """A wheel's members as pip installs them into ``site`` (purelib and platlib are one)."""
    files: dict[str, Member] = {}
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if not info.is_dir():
                files[f"{site}/{info.filename}"] = zf.read(info)
    return files


def distribution(
    name: str, version: str, files: dict[str, bytes], site: str = SITE
) -> dict[str, Member]:
    """A distribution as installed: its files under ``site``, METADATA and a RECORD of them."""
    dist_info = f"{name.replace('-', '_')}-{version}.dist-info"
    members: dict[str, Member] = {f"{site}/{path}": data for path, data in files.items()}
    rows = [f"{path},," for path in files] + [f"{dist_info}/METADATA,,", f"{dist_info}/RECORD,,"]
    members[f"{site}/{dist_info}/METADATA"] = _metadata(name, version).encode()
    members[f"{site}/{dist_info}/RECORD"] = ("\n".join(rows) + "\n").encode()
    return members


def wheel_of(path: Path, name: str, version: str, files: dict[str, bytes]) -> Path:
    """The same distribution as a wheel file (for the one-analysis comparison)."""
    dist_info = f"{name.replace('-', '_')}-{version}.dist-info"
    wheel = path / f"{name.replace('-', '_')}-{version}-py3-none-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        rows = []
        for member, data in files.items():
            zf.writestr(member, data)
            rows.append(f"{member},,")
        zf.writestr(f"{dist_info}/METADATA", _metadata(name, version))
        zf.writestr(f"{dist_info}/WHEEL", WHEEL_FILE)
        rows += [f"{dist_info}/METADATA,,", f"{dist_info}/WHEEL,,", f"{dist_info}/RECORD,,"]
        zf.writestr(f"{dist_info}/RECORD", "\n".join(rows) + "\n")
    return wheel
