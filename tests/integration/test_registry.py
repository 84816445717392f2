"""``docker://`` images from real registries on loopback (Debian's docker-registry, started by
scripts/services): ``open`` (no auth), ``basic`` (htpasswd; blobs redirected to a store that
refuses a request carrying Authorization, as S3 does) and ``token`` (Bearer tokens from a real
token server, scripts/registry-auth: anonymous pull of public/*, everything with credentials).
The images are the OCI layouts of test_images (real fixture binaries, the real
nvidia-cuda-runtime wheel; layers with whiteouts; an amd64 + arm64 index), pushed by skopeo as
they are (OCI) and converted (a Docker manifest list of schema 2 manifests, --format v2s2).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from archgap.api import scan_archives
from archgap.image import registries_conf
from archgap.image.registry import RegistryClient, RegistryError, RegistrySource
from archgap.image.registry_auth import parse_reference
from archgap.image.source import ImageError, parse_platform
from archgap.index.options import IndexOptions
from tests.helpers import json_output, run_cli
from tests.integration.test_images import (
    GPUS,
    RUNTIME,
    amd64_image,
    arm64_image,
    fixture_files,
)
from tests.integration.test_remote_services import closed_port, require
from tests.oci_images import Image, Layer, Member, distribution, write_layout

pytestmark = pytest.mark.skipif(RUNTIME is None, reason="scripts/testdata downloads the wheels")


def push(layout: Path, tag: str, destination: str, *options: str) -> None:
    """``skopeo copy --all oci:LAYOUT:TAG docker://DESTINATION`` over plain HTTP."""
    subprocess.run(
        ["skopeo", "copy", "--quiet", "--all", "--dest-tls-verify=false", *options,
         f"oci:{layout}:{tag}", f"docker://{destination}"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The registries' status, with public/cuda:v1 and private/cuda:v1 pushed (an index:
    amd64 and arm64 as in test_images) and the layout they came from."""
    info = require("registry")
    layout = write_layout(tmp_path_factory.mktemp("oci"), {"v1": [amd64_image(), arm64_image()]})
    for repo in ("public/cuda", "private/cuda"):
        push(layout, "v1", f"{info['open']}/{repo}:v1")
    return {**info, "layout": layout}


@pytest.fixture
def no_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME without credential files, none of the variables that point at others, and an
    empty directory instead of the machine's /etc/containers (registries.conf)."""
    for name in ("REGISTRY_AUTH_FILE", "DOCKER_CONFIG", "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(registries_conf, "SYSTEM_DIR", str(tmp_path / "etc-containers"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # a blob cache of its own
    return tmp_path


def auth_file(path: Path, key: str, user: str, password: str) -> Path:
    encoded = base64.b64encode(f"{user}:{password}".encode()).decode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"auths": {key: {"auth": encoded}}}))
    return path


def client(address: str, repo: str) -> RegistryClient:
    return RegistryClient(parse_reference(f"docker://{address}/{repo}"))


def layout_blob(layout: Path, digest: str) -> bytes:
    return (layout / "blobs" / "sha256" / digest.split(":")[1]).read_bytes()


def pull(address: str, repo: str) -> dict[str, list[bytes]]:
    """Each platform's layer tars, through the registry's index, as the source streams them."""
    source = RegistrySource(f"docker://{address}/{repo}")
    out: dict[str, list[bytes]] = {}
    for arch in ("amd64", "arm64"):
        image = source.manifest(parse_platform(f"linux/{arch}"))
        assert image.platform.architecture == arch
        out[arch] = []
        for blob in image.layers:
            with source.open_blob(blob) as stream:
                out[arch].append(uncompressed(stream.read()))
    return out


def uncompressed(data: bytes) -> bytes:
    """A layer's tar (skopeo keeps gzip and zstd layers as they are and gzips plain tars)."""
    if data.startswith(b"\x1f\x8b"):
        return gzip.decompress(data)
    if data.startswith(b"\x28\xb5\x2f\xfd"):
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    return data


def layers_of(registry: dict[str, Any]) -> dict[str, list[bytes]]:
    """Each platform's layer tars as the layout holds them."""
    layout: Path = registry["layout"]
    [top] = json.loads((layout / "index.json").read_text())["manifests"]
    index = json.loads(layout_blob(layout, top["digest"]))
    out = {}
    for entry in index["manifests"]:
        manifest = json.loads(layout_blob(layout, entry["digest"]))
        layers = [
            uncompressed(layout_blob(layout, layer["digest"])) for layer in manifest["layers"]
        ]
        out[entry["platform"]["architecture"]] = layers
    return out


def test_open_registry_serves_the_pushed_index_and_layers(
    registry: dict[str, Any], no_credentials: Path
) -> None:
    assert pull(registry["open"], "public/cuda:v1") == layers_of(registry)
    c = client(registry["open"], "public/cuda:v1")
    top, media_type = c.manifest_bytes()
    assert media_type == "application/vnd.oci.image.index.v1+json"
    assert c.scheme == "http"  # loopback: HTTPS tried first, then plain HTTP, as docker does
    # by digest: checked against the digest it was asked for
    digest = "sha256:" + hashlib.sha256(top).hexdigest()
    assert client(registry["open"], f"public/cuda@{digest}").manifest_bytes()[0] == top


def test_https_registry(registry: dict[str, Any], no_credentials: Path) -> None:
    """The tls instance speaks HTTPS only (a self-signed certificate; loopback, so not verified,
    as docker treats a loopback registry): the client stays on HTTPS."""
    assert pull(registry["tls"], "public/cuda:v1") == layers_of(registry)
    c = client(registry["tls"], "public/cuda:v1")
    assert c.manifest_bytes()[1] == "application/vnd.oci.image.index.v1+json"
    assert c.scheme == "https"


def test_registry_image_verdicts_equal_the_layouts(
    registry: dict[str, Any], no_credentials: Path
) -> None:
    """One analysis: the same image judged from the registry and from the OCI layout."""
    label = f"docker://{registry['open']}/public/cuda:v1"
    for platform in ("linux/amd64", "linux/arm64"):
        wanted = IndexOptions(platform=platform)
        pulled = scan_archives([label], gpus=GPUS, options=wanted)
        local = scan_archives([f"oci:{registry['layout']}:v1"], gpus=GPUS, options=wanted)
        assert not pulled.problems, pulled.problems
        assert rows(pulled) == rows(local) and rows(pulled)


def test_docker_manifest_list_and_schema_2(
    registry: dict[str, Any], tmp_path: Path, no_credentials: Path
) -> None:
    """skopeo --format v2s2 pushes a Docker manifest list of schema 2 manifests (gzip layers
    only: Docker images cannot carry zstd); judged as the OCI layout it came from."""
    amd64 = Image([Layer(distribution("archgap-fixture", "1.0", fixture_files()))])
    layout = write_layout(tmp_path / "oci", {"v2s2": [amd64, arm64_image()]})
    push(layout, "v2s2", f"{registry['open']}/public/docker-format:v2s2", "--format", "v2s2")
    c = client(registry["open"], "public/docker-format:v2s2")
    top, media_type = c.manifest_bytes()
    assert media_type == "application/vnd.docker.distribution.manifest.list.v2+json"
    entries = json.loads(top)["manifests"]
    assert {e["mediaType"] for e in entries} == {
        "application/vnd.docker.distribution.manifest.v2+json"
    }
    for platform in ("linux/amd64", "linux/arm64"):
        wanted = IndexOptions(platform=platform)
        pulled = scan_archives([f"docker://{registry['open']}/public/docker-format:v2s2"],
                               gpus=GPUS, options=wanted)  # fmt: skip
        local = scan_archives([f"oci:{layout}:v2s2"], gpus=GPUS, options=wanted)
        assert not pulled.problems, pulled.problems
        assert rows(pulled) == rows(local) and rows(pulled)


def rows(report: Any) -> set[tuple[str, str, str, str, str]]:
    return {(p.package, p.version, p.gpu, p.verdict, p.reason) for p in report.packages}


def test_token_server_grants_anonymous_pull_of_public_only(
    registry: dict[str, Any], no_credentials: Path
) -> None:
    assert pull(registry["token"], "public/cuda:v1") == layers_of(registry)
    c = client(registry["token"], "private/cuda:v1")
    with pytest.raises(RegistryError) as refused:
        c.manifest_bytes()
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
    assert pull(registry["token"], "private/cuda:v1") == layers_of(registry)
    auth_file(path, registry["token"], registry["user"], "wrong")
    c = client(registry["token"], "private/cuda:v1")
    with pytest.raises(RegistryError) as refused:
        c.manifest_bytes()
    assert refused.value.kind == "auth"
    assert "token server" in str(refused.value) and "HTTP 401" in str(refused.value)
    assert str(path) in str(refused.value)


def test_basic_auth_and_a_blob_redirect_without_the_credentials(
    registry: dict[str, Any], no_credentials: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The basic registry redirects blob GETs to the store (the auth server's blob path), which
    answers 400 to a request with Authorization: the layers arrive only if the client drops it."""
    c = client(registry["basic"], "public/cuda:v1")
    with pytest.raises(RegistryError, match="asks for a user and password") as refused:
        c.manifest_bytes()
    assert refused.value.kind == "auth"
    docker = no_credentials / "dockercfg"
    auth_file(docker / "config.json", registry["basic"], registry["user"], registry["password"])
    monkeypatch.setenv("DOCKER_CONFIG", str(docker))
    log = Path(registry["auth_log"])
    before = log.read_text().count("/docker/registry/v2/blobs/")
    assert pull(registry["basic"], "public/cuda:v1") == layers_of(registry)
    served = log.read_text().count("/docker/registry/v2/blobs/") - before
    # every config and layer came from the store behind the redirect (2 configs, 4 layers)
    assert served == 2 + sum(len(v) for v in layers_of(registry).values())


def test_each_blob_crosses_the_wire_once(
    registry: dict[str, Any], no_credentials: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The layer reader streams a layer twice (headers, then the wanted members): the second
    pass, and a second run, read the verified copy in the cache. Counted where the basic
    registry's blob redirects land: amd64 is one config and three layers."""
    docker = no_credentials / "dockercfg"
    auth_file(docker / "config.json", registry["basic"], registry["user"], registry["password"])
    monkeypatch.setenv("DOCKER_CONFIG", str(docker))
    log = Path(registry["auth_log"])
    target = f"docker://{registry['basic']}/public/cuda:v1"
    wanted = IndexOptions(platform="linux/amd64")
    counts = []
    for _ in range(2):
        before = log.read_text().count("/docker/registry/v2/blobs/")
        report = scan_archives([target], gpus=GPUS, options=wanted)
        assert not report.problems and report.packages
        counts.append(log.read_text().count("/docker/registry/v2/blobs/") - before)
    assert counts == [1 + 3, 0]
    cached = sorted(p.name for p in (no_credentials / "cache/archgap/blobs/sha256").iterdir())
    assert len(cached) == 4 and not any(name.endswith(".part") for name in cached)


def test_a_cache_that_cannot_be_written_does_not_fail_the_read(
    registry: dict[str, Any], no_credentials: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    not_a_directory = no_credentials / "cache-file"
    not_a_directory.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(not_a_directory))
    assert pull(registry["open"], "public/cuda:v1") == layers_of(registry)


def test_credentials_files_in_containers_order(
    registry: dict[str, Any], no_credentials: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$XDG_RUNTIME_DIR/containers/auth.json comes before ~/.docker/config.json."""
    runtime = no_credentials / "run"
    auth_file(runtime / "containers" / "auth.json", registry["basic"], registry["user"],
              registry["password"])  # fmt: skip
    auth_file(no_credentials / ".docker" / "config.json", registry["basic"], "nobody", "x")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    c = client(registry["basic"], "public/cuda:v1")
    assert c.manifest_bytes()[1] == "application/vnd.oci.image.index.v1+json"
    assert c.credentials.source == str(runtime / "containers" / "auth.json")


def test_unknown_names_and_unreachable_hosts_are_reasons(
    registry: dict[str, Any], no_credentials: Path
) -> None:
    # docker-registry 2.8 answers MANIFEST_UNKNOWN for an unknown tag and an unknown repository
    for repo in ("public/cuda:no-such-tag", "public/no-such-repo:v1"):
        c = client(registry["open"], repo)
        with pytest.raises(RegistryError, match="HTTP 404: MANIFEST_UNKNOWN") as missing:
            c.manifest_bytes()
        assert missing.value.kind == "not-found"
    down = client(f"127.0.0.1:{closed_port()}", "public/cuda:v1")
    with pytest.raises(RegistryError, match="cannot reach") as unreachable:
        down.manifest_bytes()
    assert unreachable.value.kind == "unreachable"
    assert "Connection refused" in str(unreachable.value)


def test_truncated_and_altered_layers_fail_the_stream(
    registry: dict[str, Any], tmp_path: Path, no_credentials: Path
) -> None:
    """A fresh image whose one layer (unique bytes) is then damaged in the registry's storage:
    the registry serves what it has, the stream is checked against the manifest."""
    unique: dict[str, Member] = {"opt/x.bin": os.urandom(4096)}
    write_layout(tmp_path / "oci", {"t": Image([Layer(unique)])})
    repo = f"public/damaged-{uuid.uuid4().hex[:8]}"
    push(tmp_path / "oci", "t", f"{registry['open']}/{repo}:t")
    source = RegistrySource(f"docker://{registry['open']}/{repo}:t")
    [blob] = source.manifest(None).layers
    hexdigest = blob.digest.split(":")[1]
    blobs = Path(registry["storage"]) / "docker/registry/v2/blobs/sha256"
    stored = blobs / hexdigest[:2] / hexdigest / "data"
    whole = stored.read_bytes()
    stored.write_bytes(whole[: len(whole) // 2])  # the registry now serves half the layer
    with pytest.raises(
        ImageError, match=f"{len(whole) // 2} bytes, the descriptor says {len(whole)}"
    ):
        source.open_blob(blob).read()
    stored.write_bytes(bytes([whole[0] ^ 1]) + whole[1:])  # same size, one bit flipped
    with pytest.raises(ImageError, match="content does not match its digest"):
        source.open_blob(blob).read()
    # neither went into the cache (only the manifest's config did, read whole and verified)
    cache = no_credentials / "cache" / "archgap" / "blobs" / "sha256"
    assert hexdigest not in {p.name for p in cache.iterdir()}
    assert not [p for p in cache.iterdir() if p.name.endswith(".part")]


def test_cli_scan_and_kernels_of_a_registry_image(
    registry: dict[str, Any], no_credentials: Path
) -> None:
    target = f"docker://{registry['token']}/public/cuda:v1"
    scanned = run_cli("scan", target, "--gpu", "12.0", "--platform", "linux/amd64", "--json")
    assert scanned.returncode in (0, 1), scanned.stderr
    doc = json_output(scanned, "scan")
    # the two distributions, and extra/libcomp_all.so that no RECORD owns
    packages = {p["package"] for p in doc["packages"]}
    assert packages == {"archgap-fixture", "nvidia-cuda-runtime", "(no distribution)"}
    listed = run_cli("kernels", target, "--platform", "linux/arm64", "--json")
    assert listed.returncode == 0, listed.stderr
    paths = [f["path"] for f in json_output(listed, "kernels")["files"]]
    assert any(p.endswith("k.cubin") for p in paths), paths  # the arm64 image's one cubin
    refused = run_cli("scan", f"docker://{registry['token']}/private/cuda:v1", "--gpu", "12.0")
    assert refused.returncode == 2
    assert "refused access (HTTP 401" in refused.stderr and "Traceback" not in refused.stderr
    # skopeo's flag spelling; anything but a boolean is a usage error
    assert run_cli("kernels", target, "--tls-verify=false").returncode == 0
    bad = run_cli("kernels", target, "--tls-verify=maybe")
    assert bad.returncode == 2 and "'maybe' is not true or false" in bad.stderr
