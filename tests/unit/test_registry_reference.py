"""docker:// references and credential lookup, by the rules docker and skopeo follow
(distribution/reference's normalization; containers-auth.json(5))."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from archgap.image.registry import RegistryClient, is_loopback
from archgap.image.registry_auth import (
    BadReference,
    find_credentials,
    parse_challenge,
    parse_reference,
)

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("text", "host", "api", "repository", "reference"),
    [
        # no host: Docker Hub, one-component names under library/, no tag means latest
        ("docker://ubuntu", "docker.io", "registry-1.docker.io", "library/ubuntu", "latest"),
        ("vllm/vllm-openai:v0.11.0", "docker.io", "registry-1.docker.io", "vllm/vllm-openai",
         "v0.11.0"),
        ("docker://index.docker.io/python:3.12", "docker.io", "registry-1.docker.io",
         "library/python", "3.12"),
        # a first component with a dot or a port, or localhost, is a host
        ("docker://nvcr.io/nvidia/pytorch:25.01-py3", "nvcr.io", "nvcr.io", "nvidia/pytorch",
         "25.01-py3"),
        ("docker://localhost:5000/a/b", "localhost:5000", "localhost:5000", "a/b", "latest"),
        ("docker://localhost/x", "localhost", "localhost", "x", "latest"),
        # a digest wins over a tag
        (f"docker://ghcr.io/o/i:1@{DIGEST}", "ghcr.io", "ghcr.io", "o/i", DIGEST),
        (f"docker://ubuntu@{DIGEST}", "docker.io", "registry-1.docker.io", "library/ubuntu",
         DIGEST),
    ],
)  # fmt: skip
def test_references_are_normalized_like_docker(
    text: str, host: str, api: str, repository: str, reference: str
) -> None:
    ref = parse_reference(text)
    assert (ref.host, ref.api_host, ref.repository, ref.reference) == (
        host,
        api,
        repository,
        reference,
    )


@pytest.mark.parametrize(
    "text", ["docker://Ubuntu", "docker://ubuntu:bad tag", "docker://x@sha256:12", "docker://"]
)
def test_bad_references_say_why(text: str) -> None:
    with pytest.raises(BadReference, match=r"is not a"):
        parse_reference(text)


def test_loopback_hosts() -> None:
    assert is_loopback("127.0.0.1:5000") and is_loopback("localhost") and is_loopback("[::1]:80")
    assert not is_loopback("registry-1.docker.io") and not is_loopback("10.0.0.1:5000")


def write_auth(path: Path, doc: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_docker_hub_key_and_the_most_specific_entry(tmp_path: Path) -> None:
    """`docker login` writes Docker Hub as https://index.docker.io/v1/; a containers auth.json
    may scope an entry to a namespace, and the longest match wins."""
    write_auth(
        tmp_path / ".docker" / "config.json",
        {
            "auths": {
                "https://index.docker.io/v1/": {"auth": b64("hub:one")},
                "ghcr.io": {"auth": b64("org:two")},
                "ghcr.io/team": {"username": "team", "password": "three"},
            }
        },
    )
    env = {"HOME": str(tmp_path)}
    hub = find_credentials(parse_reference("docker://ubuntu"), env)
    assert (hub.user, hub.secret) == ("hub", "one")
    team = find_credentials(parse_reference("docker://ghcr.io/team/app"), env)
    assert (team.user, team.secret) == ("team", "three")
    other = find_credentials(parse_reference("docker://ghcr.io/teams/app"), env)
    assert other.user == "org"
    assert find_credentials(parse_reference("docker://quay.io/x/y"), env).basic is None


def test_a_credential_helper_that_is_not_installed_is_a_note(tmp_path: Path) -> None:
    """Docker Desktop's credsStore on a machine without docker-credential-desktop (the real
    helpers: tests/integration/test_registry_auth.py)."""
    config = tmp_path / "d" / "config.json"
    write_auth(config, {"auths": {}, "credsStore": "desktop"})
    creds = find_credentials(
        parse_reference("docker://ubuntu"),
        {"DOCKER_CONFIG": str(tmp_path / "d"), "PATH": str(tmp_path)},
    )
    assert creds.basic is None
    assert creds.note == f"docker-credential-desktop (credsStore in {config}) is not on PATH"


def test_challenges() -> None:
    bearer = parse_challenge(
        'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",'
        'scope="repository:library/ubuntu:pull"'
    )
    assert bearer is not None and bearer.scheme == "bearer"
    assert dict(bearer.params) == {
        "realm": "https://auth.docker.io/token",
        "service": "registry.docker.io",
        "scope": "repository:library/ubuntu:pull",
    }
    basic = parse_challenge('Basic realm="Registry Realm"')
    assert basic is not None and basic.scheme == "basic"
    assert parse_challenge(None) is None


def test_plain_http_only_for_insecure_registries(tmp_path: Path) -> None:
    """As docker and skopeo: loopback registries, or --tls-verify=false, may be plain HTTP."""
    env = {"HOME": str(tmp_path)}  # the client reads credentials: never this machine's files
    remote = parse_reference("docker://ghcr.io/o/i")
    assert not RegistryClient(remote, env=env).insecure
    assert RegistryClient(remote, tls_verify=False, env=env).insecure
    assert RegistryClient(parse_reference("docker://localhost:5000/x"), env=env).insecure
