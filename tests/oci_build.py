"""OCI image layouts built from real files, for the image tests (pushed to a registry by skopeo).

``layer({"usr/lib/libx.so": PATH_OR_BYTES, "usr/lib/.wh.liby.so": b""})`` is a gzip'd tar;
``write_layout(DIR, "tag", {"amd64": [layer, ...], "arm64": [...]})`` writes an OCI layout whose
tag points at one image manifest (one platform) or an image index (several).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path
from typing import Any

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def layer(files: dict[str, Path | bytes]) -> bytes:
    """A gzip'd tar of ``files`` (path in the image -> a real file or bytes), parents included."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs: set[str] = set()
        for name, content in files.items():
            parts = name.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    info = tarfile.TarInfo(d)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
            data = content.read_bytes() if isinstance(content, Path) else content
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def _blob(root: Path, data: bytes, media_type: str) -> dict[str, Any]:
    digest = hashlib.sha256(data).hexdigest()
    path = root / "blobs" / "sha256" / digest
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}


def _image(root: Path, arch: str, layers: list[bytes]) -> dict[str, Any]:
    diff_ids = [f"sha256:{hashlib.sha256(gzip.decompress(b)).hexdigest()}" for b in layers]
    config = {
        "architecture": arch,
        "os": "linux",
        "config": {"Env": ["PATH=/usr/local/bin:/usr/bin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": _blob(root, json.dumps(config).encode(), OCI_CONFIG),
        "layers": [_blob(root, b, OCI_LAYER) for b in layers],
    }
    return _blob(root, json.dumps(manifest).encode(), OCI_MANIFEST)


def write_layout(root: Path, tag: str, platforms: dict[str, list[bytes]]) -> Path:
    """An OCI layout at ``root`` (created or extended) with ``tag``; returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    images = {arch: _image(root, arch, layers) for arch, layers in platforms.items()}
    if len(images) == 1:
        [top] = images.values()
    else:
        entries = [{**d, "platform": {"architecture": a, "os": "linux"}} for a, d in images.items()]
        index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}
        top = _blob(root, json.dumps(index).encode(), OCI_INDEX)
    index_path = root / "index.json"
    doc = json.loads(index_path.read_text()) if index_path.exists() else {"manifests": []}
    top = {**top, "annotations": {"org.opencontainers.image.ref.name": tag}}
    doc = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [*doc["manifests"], top]}
    index_path.write_text(json.dumps(doc))
    return root


def push(layout: Path, tag: str, destination: str) -> None:
    """``skopeo copy --all oci:LAYOUT:TAG docker://DESTINATION`` over plain HTTP."""
    subprocess.run(
        ["skopeo", "copy", "--quiet", "--all", "--dest-tls-verify=false",
         f"oci:{layout}:{tag}", f"docker://{destination}"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
