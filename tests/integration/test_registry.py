"""The registry v2 client against real registries on loopback (Debian's docker-registry, started
by scripts/services): ``open`` (no auth), ``basic`` (htpasswd; blobs redirected to a store that
refuses a request carrying Authorization, as S3 does) and ``token`` (Bearer tokens from a real
token server, scripts/registry-auth: anonymous pull of public/*, everything with credentials).
Images are OCI layouts built here from the project's fixture binaries and pushed by skopeo.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from archgap.image.registry import BlobError, RegistryClient, RegistryError
from archgap.image.registry_auth import parse_reference
from tests.helpers import FIXTURES
from tests.integration.test_remote_services import closed_port, require
from tests.oci_build import layer, push, write_layout

BIN = FIXTURES / "cuda" / "bin"
SITE = "usr/local/lib/python3.11/site-packages"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The registries' status, with the test images pushed: public/cuda:1 and private/cuda:1
    (an index: amd64 with libmix.so, arm64 with libptxonly.so) and a one-platform image."""
    info = require("registry")
    layout = tmp_path_factory.mktemp("layout")
    layers = {
        "amd64": [layer({f"{SITE}/mix/libmix.so": BIN / "libmix.so"})],
        "arm64": [layer({f"{SITE}/mix/libptxonly.so": BIN / "libptxonly.so"})],
    }
    write_layout(layout, "multi", layers)
    write_layout(layout, "single", {"amd64": layers["amd64"]})
    for repo in ("public/cuda", "private/cuda"):
        push(layout, "multi", f"{info['open']}/{repo}:1")
    push(layout, "single", f"{info['open']}/public/single:1")
    return {**info, "layers": layers}


@pytest.fixture
def no_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME without credential files, and none of the variables that point at others."""
    for name in ("REGISTRY_AUTH_FILE", "DOCKER_CONFIG", "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def auth_file(path: Path, key: str, user: str, password: str) -> Path:
    encoded = base64.b64encode(f"{user}:{password}".encode()).decode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"auths": {key: {"auth": encoded}}}))
    return path


def client(address: str, repo: str) -> RegistryClient:
    return RegistryClient(parse_reference(f"docker://{address}/{repo}"))


def pull_all(c: RegistryClient) -> dict[str, bytes]:
    """Each platform's layer bytes, through the index the tag names."""
    index = c.manifest()
    assert index.media_type == "application/vnd.oci.image.index.v1+json"
    out = {}
    for entry in index.body["manifests"]:
        image = c.manifest(entry["digest"])
        [blob] = image.body["layers"]
        with c.open_blob(blob["digest"], blob["size"]) as stream:
            out[entry["platform"]["architecture"]] = stream.read()
    return out


def test_open_registry_serves_the_pushed_index_and_layers(
    registry: dict[str, Any], no_credentials: Path
) -> None:
    """skopeo copies an OCI layout's gzip layers unchanged: what comes back is what we built."""
    c = client(registry["open"], "public/cuda:1")
    pulled = pull_all(c)
    assert pulled == {arch: blobs[0] for arch, blobs in registry["layers"].items()}
    assert c.scheme == "http"  # loopback: HTTPS tried first, then plain HTTP, as docker does
    single = client(registry["open"], "public/single:1").manifest()
    assert single.media_type == "application/vnd.oci.image.manifest.v1+json"
    # by digest: the manifest is checked against the digest it was asked for
    by_digest = client(registry["open"], f"public/cuda@{c.manifest().digest}").manifest()
    assert by_digest.digest == c.manifest().digest


def test_token_server_grants_anonymous_pull_of_public_only(
    registry: dict[str, Any], no_credentials: Path
) -> None:
    assert pull_all(client(registry["token"], "public/cuda:1"))
    with pytest.raises(RegistryError) as refused:
        client(registry["token"], "private/cuda:1").manifest()
    assert refused.value.kind == "auth"
    assert "HTTP 401" in str(refused.value) and "without credentials" in str(refused.value)
    assert str(no_credentials / ".docker" / "config.json") in str(refused.value)


def test_token_flow_with_the_users_credentials(
    registry: dict[str, Any], no_credentials: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """REGISTRY_AUTH_FILE (skopeo/podman's) with a scheme in the key, as `docker login` writes."""
    path = auth_file(no_credentials / "auth.json", f"http://{registry['token']}", registry["user"],
                     registry["password"])  # fmt: skip
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(path))
    assert set(pull_all(client(registry["token"], "private/cuda:1"))) == {"amd64", "arm64"}
    auth_file(path, registry["token"], registry["user"], "wrong")
    with pytest.raises(RegistryError) as refused:
        client(registry["token"], "private/cuda:1").manifest()
    assert refused.value.kind == "auth"
    assert "token server" in str(refused.value) and "HTTP 401" in str(refused.value)
    assert str(path) in str(refused.value)


def test_basic_auth_and_a_blob_redirect_without_the_credentials(
    registry: dict[str, Any], no_credentials: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The basic registry redirects blob GETs to the store (the auth server's blob path), which
    answers 400 to a request with Authorization: the layers arrive only if the client drops it."""
    with pytest.raises(RegistryError, match="asks for a user and password") as refused:
        client(registry["basic"], "public/cuda:1").manifest()
    assert refused.value.kind == "auth"
    docker = no_credentials / "dockercfg"
    auth_file(docker / "config.json", registry["basic"], registry["user"], registry["password"])
    monkeypatch.setenv("DOCKER_CONFIG", str(docker))
    before = Path(registry["auth_log"]).read_text().count("/docker/registry/v2/blobs/")
    pulled = pull_all(client(registry["basic"], "public/cuda:1"))
    assert pulled == {arch: blobs[0] for arch, blobs in registry["layers"].items()}
    after = Path(registry["auth_log"]).read_text().count("/docker/registry/v2/blobs/")
    assert after - before == 2  # both layers came from the store behind the redirect


def test_credentials_files_in_containers_order(
    registry: dict[str, Any], no_credentials: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$XDG_RUNTIME_DIR/containers/auth.json comes before ~/.docker/config.json."""
    runtime = no_credentials / "run"
    auth_file(runtime / "containers" / "auth.json", registry["basic"], registry["user"],
              registry["password"])  # fmt: skip
    auth_file(no_credentials / ".docker" / "config.json", registry["basic"], "nobody", "x")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    c = client(registry["basic"], "public/single:1")
    assert c.manifest().media_type == "application/vnd.oci.image.manifest.v1+json"
    assert c.credentials.source == str(runtime / "containers" / "auth.json")


def test_unknown_names_and_unreachable_hosts_are_reasons(
    registry: dict[str, Any], no_credentials: Path
) -> None:
    for repo in ("public/cuda:no-such-tag", "public/no-such-repo:1"):
        with pytest.raises(RegistryError, match="HTTP 404") as missing:
            client(registry["open"], repo).manifest()
        assert missing.value.kind == "not-found"
        assert "MANIFEST_UNKNOWN" in str(missing.value) or "NAME_UNKNOWN" in str(missing.value)
    with pytest.raises(RegistryError, match="cannot reach") as down:
        client(f"127.0.0.1:{closed_port()}", "public/cuda:1").manifest()
    assert down.value.kind == "unreachable"
    assert "Connection refused" in str(down.value)


@pytest.fixture
def damaged(registry: dict[str, Any], tmp_path: Path) -> Iterator[tuple[RegistryClient, Path]]:
    """A fresh image whose only layer (unique bytes) is then damaged in the registry's storage."""
    layout = write_layout(tmp_path / "layout", "t", {"amd64": [layer({"x": os.urandom(4096)})]})
    repo = f"public/damaged-{uuid.uuid4().hex[:8]}"
    push(layout, "t", f"{registry['open']}/{repo}:t")
    c = client(registry["open"], f"{repo}:t")
    [blob] = c.manifest().body["layers"]
    hexdigest = blob["digest"].split(":")[1]
    data = Path(registry["storage"]) / "docker/registry/v2/blobs/sha256" / hexdigest[:2] / hexdigest
    yield c, data / "data"


def test_truncated_and_altered_blobs_fail_the_stream(
    damaged: tuple[RegistryClient, Path], no_credentials: Path
) -> None:
    c, stored = damaged
    [blob] = c.manifest().body["layers"]
    whole = stored.read_bytes()
    assert hashlib.sha256(whole).hexdigest() == blob["digest"].split(":")[1]
    stored.write_bytes(whole[: len(whole) // 2])  # the registry now serves half the layer
    with pytest.raises(BlobError, match=f"truncated: {len(whole) // 2} of {len(whole)} bytes"):
        c.open_blob(blob["digest"], blob["size"]).read()
    stored.write_bytes(bytes([whole[0] ^ 1]) + whole[1:])  # same size, one bit flipped
    with pytest.raises(BlobError, match="the bytes have the digest sha256:"):
        c.open_blob(blob["digest"], blob["size"]).read()
