"""Registry credentials from credential helpers, and Bearer token renewal, against the real
registries of test_registry (Debian's docker-registry; tokens from scripts/registry-auth).

The credential helper is the real ``docker-credential-pass`` (Debian's
golang-docker-credential-helpers) over a real ``pass`` store, encrypted to a gpg key made for the
test (no passphrase, in a GNUPGHOME of its own; its gpg-agent is stopped afterwards). Failure
modes a real helper cannot be made to show on demand (a "not found" exit, a crash, bad JSON, a
hang) are small executable scripts speaking the same stdin/stdout protocol.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from archgap.image.registry import RegistryError, RegistrySource
from archgap.image.registry_auth import find_credentials, parse_reference
from archgap.image.source import parse_platform
from tests.hangs import Sleeper
from tests.helpers import run_cli
from tests.integration import test_registry
from tests.integration.test_registry import client, layers_of, pull, push, uncompressed

Store = Callable[[str, str, str], None]
registry = test_registry.registry  # the registries, with public/cuda and private/cuda pushed
no_credentials = test_registry.no_credentials  # a HOME without credential files


def run(argv: list[str], stdin: str = "", env: dict[str, str] | None = None) -> None:
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, f"{argv}: {done.stdout} {done.stderr}"


@pytest.fixture(scope="module")
def gpg_key() -> Iterator[tuple[str, str]]:
    """A GNUPGHOME with a key without passphrase: (GNUPGHOME, fingerprint); its gpg-agent is
    stopped afterwards."""
    missing = [p for p in ("docker-credential-pass", "pass", "gpg") if not shutil.which(p)]
    if missing:
        # Under CI=true the conftest turns this skip into a failure.
        pytest.skip(f"scripts/services installs them: {', '.join(missing)} missing")
    home = tempfile.mkdtemp(prefix="agpg")  # short: gpg-agent's socket path has a length limit
    gnupg = os.path.join(home, "g")
    os.mkdir(gnupg, 0o700)
    env = {**os.environ, "GNUPGHOME": gnupg}
    try:
        run(["gpgconf", "--launch", "gpg-agent"], env=env)
        run(["gpg", "--batch", "--quiet", "--pinentry-mode", "loopback", "--passphrase", "",
             "--quick-gen-key", "archgap test <test@archgap.invalid>", "default", "default",
             "never"], env=env)  # fmt: skip
        listed = subprocess.run(["gpg", "--batch", "--list-keys", "--with-colons"], env=env,
                                capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
        fingerprint = next(
            line.split(":")[9] for line in listed.stdout.splitlines() if line.startswith("fpr:")
        )
        yield gnupg, fingerprint
    finally:
        subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=env, capture_output=True,
                       timeout=60)  # fmt: skip
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def pass_store(gpg_key: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    """An empty ``pass`` store for docker-credential-pass; ``store(url, user, secret)`` is
    ``docker-credential-pass store``, as ``docker login`` with this credsStore runs it."""
    gnupg, fingerprint = gpg_key
    monkeypatch.setenv("GNUPGHOME", gnupg)
    monkeypatch.setenv("PASSWORD_STORE_DIR", str(tmp_path / "pass-store"))
    run(["pass", "init", fingerprint])

    def store(url: str, user: str, secret: str) -> None:
        doc = {"ServerURL": url, "Username": user, "Secret": secret}
        run(["docker-credential-pass", "store"], json.dumps(doc))

    return store


def docker_config(home: Path, doc: dict[str, Any]) -> Path:
    path = home / ".docker" / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def basic_entry(user: str, password: str) -> dict[str, str]:
    return {"auth": base64.b64encode(f"{user}:{password}".encode()).decode()}


# -- credential helpers ---------------------------------------------------------------------


def test_creds_store_answers_instead_of_the_files_auths(
    registry: dict[str, Any], no_credentials: Path, pass_store: Store
) -> None:
    """credsStore: docker-credential-pass is asked for HOST:PORT (docker's key for a registry
    other than Docker Hub); the file's own auths entry (a wrong password) is not used."""
    host = registry["token"]
    pass_store(host, registry["user"], registry["password"])
    config = docker_config(no_credentials, {
        "credsStore": "pass", "auths": {host: basic_entry(registry["user"], "wrong")}
    })  # fmt: skip
    assert pull(host, "private/cuda:v1") == layers_of(registry)
    c = client(host, "private/cuda:v1")
    assert c.credentials.user == registry["user"]
    assert c.credentials.source == f"docker-credential-pass (credsStore in {config})"


def test_cred_helpers_entry_wins_over_creds_store(
    registry: dict[str, Any], no_credentials: Path, pass_store: Store
) -> None:
    """credHelpers names pass for the token registry, credsStore a helper that is not
    installed: the token registry gets pass's answer, any other registry the missing helper's
    reason (and anonymous access, which the basic registry refuses with that reason)."""
    pass_store(registry["token"], registry["user"], registry["password"])
    config = docker_config(no_credentials, {
        "credsStore": "archgap-none", "credHelpers": {registry["token"]: "pass"}
    })  # fmt: skip
    assert pull(registry["token"], "private/cuda:v1") == layers_of(registry)
    basic = client(registry["basic"], "public/cuda:v1")
    with pytest.raises(RegistryError, match="asks for a user and password") as refused:
        basic.manifest_bytes()
    assert f"docker-credential-archgap-none (credsStore in {config}) is not on PATH" in str(
        refused.value
    )


def test_a_helper_without_an_entry_means_anonymous(
    registry: dict[str, Any], no_credentials: Path, pass_store: Store
) -> None:
    """pass holds nothing for the registry: public images are read anonymously, a private one
    is refused with the helper's answer in the reason."""
    docker_config(no_credentials, {"credsStore": "pass"})
    assert pull(registry["token"], "public/cuda:v1") == layers_of(registry)
    with pytest.raises(RegistryError, match="HTTP 401") as refused:
        client(registry["token"], "private/cuda:v1").manifest_bytes()
    assert f"has no credentials for {registry['token']}" in str(refused.value)


def test_identity_token_from_the_helper_uses_the_oauth2_refresh_grant(
    registry: dict[str, Any], no_credentials: Path, pass_store: Store
) -> None:
    """Username ``<token>``: the secret is an identity token, exchanged at the token endpoint
    by the OAuth2 POST (grant_type=refresh_token); the token server grants private/* to it."""
    host = registry["token"]
    pass_store(host, "<token>", registry["identity_token"])
    docker_config(no_credentials, {"credHelpers": {host: "pass"}})
    log = Path(registry["auth_log"])
    posts = log.read_text().count("POST /token")
    assert pull(host, "private/cuda:v1") == layers_of(registry)
    assert log.read_text().count("POST /token") > posts
    pass_store(host, "<token>", "revoked-token")
    c = client(host, "private/cuda:v1")
    with pytest.raises(RegistryError, match=r"refused \(HTTP 400\)") as refused:
        c.manifest_bytes()
    assert refused.value.kind == "auth"
    assert "with the identity token from docker-credential-pass" in str(refused.value)


def test_identitytoken_entry_in_the_config_file(
    registry: dict[str, Any], no_credentials: Path
) -> None:
    """The same identity token written by docker login into auths (no helper)."""
    host = registry["token"]
    docker_config(no_credentials, {"auths": {host: {"identitytoken": registry["identity_token"]}}})
    assert pull(host, "private/cuda:v1") == layers_of(registry)


def test_containers_auth_file_cred_helpers_and_docker_hub_key(
    no_credentials: Path, pass_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """containers-auth.json's credHelpers, keyed by the host; for Docker Hub a helper is asked
    for https://index.docker.io/v1/ (docker's key). Only the lookup: no registry contacted."""
    pass_store("https://index.docker.io/v1/", "hubuser", "hubsecret")
    pass_store("quay.example:5000", "quayuser", "quaysecret")
    auth = no_credentials / "auth.json"
    auth.write_text(json.dumps({"credHelpers": {"docker.io": "pass", "quay.example:5000": "pass"}}))
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(auth))
    hub = find_credentials(parse_reference("docker://python:3.12"))
    assert (hub.user, hub.secret) == ("hubuser", "hubsecret")
    quay = find_credentials(parse_reference("docker://quay.example:5000/team/app"))
    assert (quay.user, quay.secret) == ("quayuser", "quaysecret")
    other = find_credentials(parse_reference("docker://ghcr.io/team/app"))
    assert other.user is None and other.note is None  # no entry for ghcr.io, no helper asked


HELPERS = {
    # what docker-credential-helpers' Get prints when nothing is stored (credentials/error.go)
    "notfound": 'echo "credentials not found in native keychain"; exit 1',
    "fails": 'echo "keychain locked" >&2; exit 3',
    "badjson": 'read url; echo "user=$url"',
    "nofields": 'echo \'{"ServerURL": "x", "Username": 7}\'',
    "hangs": "sleep 30 & wait",
}


@pytest.fixture
def script_helpers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """docker-credential-NAME scripts on PATH for HELPERS."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in HELPERS.items():
        script = bin_dir / f"docker-credential-{name}"
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


@pytest.mark.parametrize(
    ("helper", "note"),
    [
        ("notfound", "has no credentials for 127.0.0.1:5000"),
        ("fails", "failed (exit 3): keychain locked"),
        ("badjson", "printed no credentials JSON: 'user=127.0.0.1:5000'"),
        ("nofields", "printed JSON without Username and Secret strings"),
        ("hangs", "did not answer within 0.5 s"),
        ("missing", "is not on PATH"),
    ],
)
def test_helper_failures_are_notes(
    no_credentials: Path, script_helpers: Path, helper: str, note: str
) -> None:
    config = docker_config(no_credentials, {"credsStore": helper})
    # "hangs" as a sleeper: it records its pids (its shell's, its child's) and, should it ever
    # wake, leaves a marker.
    sleeper = Sleeper(script_helpers.parent / "hang")
    sleeper.script(script_helpers / "docker-credential-hangs")
    found = find_credentials(parse_reference("docker://127.0.0.1:5000/a/b"), helper_timeout=0.5)
    sleeper.assert_cut_short()  # a hung helper (and its child) was killed, not waited for
    assert not found.usable
    assert found.note == f"docker-credential-{helper} (credsStore in {config}) {note}"


def test_cli_with_a_failing_helper(
    registry: dict[str, Any], no_credentials: Path, script_helpers: Path
) -> None:
    docker_config(no_credentials, {"credsStore": "fails"})
    done = run_cli("scan", f"docker://{registry['token']}/private/cuda:v1", "--gpu", "12.0")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "refused access (HTTP 401" in done.stderr
    assert "docker-credential-fails (credsStore in" in done.stderr
    assert "failed (exit 3): keychain locked" in done.stderr


# -- token renewal --------------------------------------------------------------------------

EXPIRING = "public/expiring/cuda:v1"


@pytest.fixture(scope="module")
def expiring(registry: dict[str, Any]) -> dict[str, Any]:
    """public/expiring/cuda:v1, whose tokens the registry refuses 2 to 3 s after they were
    issued (scripts/registry-auth)."""
    push(registry["layout"], "v1", f"{registry['open']}/{EXPIRING}")
    return registry


def amd64_layers(source: RegistrySource) -> list[bytes]:
    image = source.manifest(parse_platform("linux/amd64"))
    time.sleep(3.2)  # the token the manifest was read with has expired at the registry
    out = []
    for blob in image.layers:
        with source.open_blob(blob) as stream:
            out.append(uncompressed(stream.read()))
    return out


def refused_with(token: str, host: str) -> int:
    """The registry's status for a manifest request carrying ``token``."""
    req = urllib.request.Request(
        f"http://{host}/v2/public/expiring/cuda/manifests/v1",
        headers={"Authorization": token, "Accept": "application/vnd.oci.image.index.v1+json"},
    )
    return status_of(req)


def status_of(req: urllib.request.Request) -> int:
    try:
        with urllib.request.urlopen(req, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        exc.close()
        return exc.code


def test_a_pull_spanning_the_token_expiry_renews_it(
    expiring: dict[str, Any], no_credentials: Path
) -> None:
    """The layers are asked for after the manifest's token expired at the registry (which
    refuses that token then: the control), and arrive: the token was renewed."""
    source = RegistrySource(f"docker://{expiring['token']}/{EXPIRING}")
    source.manifest(parse_platform("linux/amd64"))
    first = source.client.authorization
    assert first and first.startswith("Bearer ") and source.client.tokens >= 1
    assert amd64_layers(source) == layers_of(expiring)["amd64"]
    assert refused_with(first, expiring["token"]) == 401
    assert source.client.authorization != first and source.client.tokens >= 2


def test_a_token_the_registry_refuses_is_renewed_and_the_request_retried(
    expiring: dict[str, Any], no_credentials: Path
) -> None:
    """The client's clock stands still (as if skewed): it never thinks the token is due, the
    registry answers 401 to the expired token, and the client renews it and retries once."""
    source = RegistrySource(f"docker://{expiring['token']}/{EXPIRING}")
    source.client.clock = lambda: 0.0
    assert amd64_layers(source) == layers_of(expiring)["amd64"]
    c = source.client
    assert c.tokens_refused >= 1 and c.tokens == c.tokens_refused + 1


def test_a_token_is_renewed_before_its_expires_in(
    registry: dict[str, Any], no_credentials: Path
) -> None:
    """Tokens of 300 s (expires_in 300): with the client's clock moved past that, the next
    request gets a new token first (the registry would still have taken the old one)."""
    c = client(registry["token"], "public/cuda:v1")
    c.manifest_bytes()
    assert (c.tokens, c.tokens_refused) == (1, 0)
    c.clock = lambda: time.monotonic() + 301
    c.manifest_bytes()
    assert (c.tokens, c.tokens_refused) == (2, 0)


def rotating_refresh_token(registry: dict[str, Any]) -> str:
    """What ``docker login`` keeps from a token server that rotates refresh tokens: the
    OAuth2 password grant with access_type=offline (scripts/registry-auth: rotate=1)."""
    form = {
        "grant_type": "password", "username": registry["user"], "password": registry["password"],
        "access_type": "offline", "rotate": "1", "client_id": "archgap-tests",
        "service": registry["service"], "scope": "repository:private/cuda:pull",
    }  # fmt: skip
    req = urllib.request.Request(
        f"{registry['auth']}/token", data=urllib.parse.urlencode(form).encode()
    )
    with urllib.request.urlopen(req, timeout=30) as answer:
        token = json.loads(answer.read())["refresh_token"]
    assert isinstance(token, str) and token.startswith("archgap-test-rotating-")
    return token


def refresh_grant(registry: dict[str, Any], token: str) -> int:
    """The token server's status for one refresh grant with ``token`` (spending it)."""
    form = {"grant_type": "refresh_token", "refresh_token": token, "client_id": "archgap-tests",
            "service": registry["service"], "scope": "repository:private/cuda:pull"}  # fmt: skip
    req = urllib.request.Request(
        f"{registry['auth']}/token", data=urllib.parse.urlencode(form).encode()
    )
    return status_of(req)


def test_the_refresh_token_a_token_answer_returns_is_used_for_the_next_renewal(
    registry: dict[str, Any], no_credentials: Path
) -> None:
    """The token server rotates refresh tokens: each is good for one refresh grant, whose
    answer carries the next. Three renewals in one run (the client's clock moved past the
    tokens' 300 s) each use the one the previous answer returned: the identity token from the
    file alone would be refused (HTTP 400) at the first renewal. The tokens stay in memory:
    the file is unchanged, and a refusal of a kept token names where it came from, not it."""
    host = registry["token"]
    first = rotating_refresh_token(registry)
    config = docker_config(no_credentials, {"auths": {host: {"identitytoken": first}}})
    written = config.read_bytes()
    c = client(host, "private/cuda:v1")
    c.manifest_bytes()
    shift = [0.0]
    c.clock = lambda: time.monotonic() + shift[0]
    for renewal in (1, 2, 3):
        shift[0] = 301.0 * renewal
        c.manifest_bytes()
    assert (c.tokens, c.tokens_refused) == (4, 0)
    assert refresh_grant(registry, first) == 400  # the control: spent by the first grant
    assert config.read_bytes() == written
    kept = next(iter(c._refresh.values()))
    assert kept != first and refresh_grant(registry, kept) == 200  # the kept one is spent now
    shift[0] = 301.0 * 4
    with pytest.raises(RegistryError, match=r"refused \(HTTP 400\)") as refused:
        c.manifest_bytes()
    assert refused.value.kind == "auth"
    message = str(refused.value)
    assert "with the refresh token the token server returned for the identity token from" in (
        message
    )
    assert first not in message and kept not in message


def registries_conf(path: Path, helpers: list[str] | None, extra: str = "") -> Path:
    """A registries.conf (TOML) with ``credential-helpers`` (none: the key left out)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = f"credential-helpers = {json.dumps(helpers)}\n" if helpers is not None else ""
    path.write_text(f'unqualified-search-registries = ["docker.io"]\n{line}{extra}')
    return path


def test_registries_conf_credential_helpers_are_asked_in_order(
    registry: dict[str, Any], no_credentials: Path, pass_store: Store
) -> None:
    """containers-registries.conf(5) credential-helpers, with the real docker-credential-pass:
    the helpers are tried in order, containers-auth.json standing for the auth files. pass
    holds the right password, the docker config a wrong one: whichever comes first answers."""
    host = registry["token"]
    pass_store(host, registry["user"], registry["password"])
    docker_config(no_credentials, {"auths": {host: basic_entry(registry["user"], "wrong")}})
    user_conf = no_credentials / ".config" / "containers" / "registries.conf"
    registries_conf(user_conf, ["pass", "containers-auth.json"])
    found = find_credentials(parse_reference(f"docker://{host}/private/cuda:v1"))
    assert found.source == f"docker-credential-pass (credential-helpers in {user_conf})"
    assert pull(host, "private/cuda:v1") == layers_of(registry)
    registries_conf(user_conf, ["containers-auth.json", "pass"])  # the files first: refused
    with pytest.raises(RegistryError, match="refused"):
        client(host, "private/cuda:v1").manifest_bytes()
    # a drop-in of the user's registries.conf.d overrides the main file (name order; only
    # *.conf files count)
    drop_ins = user_conf.parent / "registries.conf.d"
    registries_conf(drop_ins / "10-pass.conf", ["pass"])
    registries_conf(drop_ins / "20-ignored.conf.bak", ["containers-auth.json"])
    assert pull(host, "private/cuda:v1") == layers_of(registry)
    # an empty list is the default (the files alone): the wrong password again
    registries_conf(drop_ins / "30-default.conf", [])
    with pytest.raises(RegistryError, match="refused"):
        client(host, "private/cuda:v1").manifest_bytes()


def test_registries_conf_of_the_system_and_its_drop_ins(
    registry: dict[str, Any], no_credentials: Path, pass_store: Store
) -> None:
    """Without a user registries.conf, the system's (here a directory standing for
    /etc/containers: never the machine's) and its drop-ins are read, then the user's drop-ins;
    with one, the system's are not. A file that is not TOML is a note, not a traceback."""
    host = registry["token"]
    pass_store(host, registry["user"], registry["password"])
    ref = parse_reference(f"docker://{host}/private/cuda:v1")
    system = no_credentials / "etc-containers"
    registries_conf(system / "registries.conf", ["containers-auth.json"])
    registries_conf(system / "registries.conf.d" / "pass.conf", ["pass"])
    origin = system / "registries.conf.d" / "pass.conf"
    assert (
        find_credentials(ref).source == f"docker-credential-pass (credential-helpers in {origin})"
    )
    user_conf = no_credentials / ".config" / "containers" / "registries.conf"
    user_conf.parent.mkdir(parents=True)
    user_conf.write_text("credential-helpers = [\n")  # not TOML
    found = find_credentials(ref)
    assert not found.usable  # the system's files are not read: the default, and no auth files
    assert found.note is not None and f"{user_conf}: not valid TOML" in found.note
    registries_conf(user_conf, ["no-such-helper", "pass"])  # a missing helper is a note
    found = find_credentials(ref)
    assert found.usable and found.user == registry["user"]
    assert pull(host, "private/cuda:v1") == layers_of(registry)
