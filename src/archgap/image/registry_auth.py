"""Image references and registry credentials, as skopeo and docker spell and keep them.

A reference is ``docker://[HOST[:PORT]/]NAME[:TAG][@DIGEST]``: the first path component is a host
when it has a ``.`` or ``:`` or is ``localhost``; otherwise the image is on Docker Hub
(``registry-1.docker.io``), and a one-component name is under ``library/``. No tag and no
digest means ``:latest``.

Credentials are the user's own, read from the files skopeo/podman and docker read, first match
wins (containers-auth.json(5) order): ``$REGISTRY_AUTH_FILE``,
``$XDG_RUNTIME_DIR/containers/auth.json``, ``~/.config/containers/auth.json``, then
``$DOCKER_CONFIG/config.json`` (default ``~/.docker/config.json``). An entry is the base64
``auth`` ("user:password") or ``username``/``password``, or an ``identitytoken`` (an OAuth2
refresh token); keys may carry a scheme or a path (``https://index.docker.io/v1/``,
``host/namespace``: the longest matching one wins).

A file may name credential helpers, which then answer instead of its ``auths``, as in docker
(docker/cli ``cli/config/configfile/file.go`` ``getConfiguredCredentialStore``): the
``credHelpers`` entry for the registry's host, else ``credsStore``. containers-auth.json(5) has
``credHelpers`` too (containers/image ``pkg/docker/config/config.go`` ``findCredentialsInFile``:
keyed by the host, never by a namespace). A helper with nothing for the registry, or one that
fails, leaves a note and the search goes on in the next file; ``Credentials.note`` collects
them, and an auth refusal repeats them.

Before and around the files, registries.conf's ``credential-helpers`` (``registries_conf``) say
which stores are asked, in order: ``containers-auth.json`` is the files above, any other NAME
``docker-credential-NAME`` (containers/image ``pkg/docker/config`` ``GetCredentials``).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from archgap.image.credhelper import HELPER_TIMEOUT, HUB_SERVER_URL, run_helper
from archgap.image.registries_conf import AUTH_FILES, credential_helpers

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
_HUB_ALIASES = {"docker.io", "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"}
_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_DIGEST = re.compile(r"[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,}")


class BadReference(ValueError):
    """A reference that is not one; the message says what is wrong."""


@dataclass(frozen=True)
class Reference:
    """A parsed ``docker://`` reference."""

    host: str  # as the user wrote it ("docker.io" for Docker Hub)
    repository: str  # "library/python", "team/app"
    tag: str | None
    digest: str | None

    @property
    def api_host(self) -> str:
        """The host the v2 API is served from."""
        return DOCKER_HUB_API if self.host == DOCKER_HUB else self.host

    @property
    def reference(self) -> str:
        """What goes after /manifests/: the digest if given, else the tag."""
        return self.digest or self.tag or "latest"

    def __str__(self) -> str:
        tag = f":{self.tag}" if self.tag else ""
        digest = f"@{self.digest}" if self.digest else ""
        return f"docker://{self.host}/{self.repository}{tag}{digest}"


def _split_host(name: str) -> tuple[str, str]:
    """(registry host, repository path) of a reference's name: the first component is a host
    when it has a dot or a port or is localhost (Docker's rule), else the name is Docker Hub's."""
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        host, path = first, rest
    else:
        host, path = DOCKER_HUB, name
    return (DOCKER_HUB if host in _HUB_ALIASES else host), path


def parse_reference(text: str) -> Reference:
    """``docker://REF`` (or REF alone) as a ``Reference``; raises ``BadReference``."""
    ref = text.removeprefix("docker://")
    name, _, digest = ref.partition("@")
    if digest and not _DIGEST.fullmatch(digest):
        raise BadReference(f"{text}: {digest!r} is not a digest (ALGORITHM:HEX)")
    host, path = _split_host(name)
    tag = None
    last_slash = path.rfind("/")
    colon = path.rfind(":")
    if colon > last_slash:
        path, tag = path[:colon], path[colon + 1 :]
        if not _TAG.fullmatch(tag):
            raise BadReference(f"{text}: {tag!r} is not a tag")
    if host == DOCKER_HUB and "/" not in path:
        path = f"library/{path}"
    if not path or not all(_COMPONENT.fullmatch(c) for c in path.split("/")):
        raise BadReference(
            f"{text}: {path!r} is not a repository name (lowercase letters, digits, . _ - /)"
        )
    return Reference(host, path, tag if tag or digest else "latest", digest or None)


@dataclass(frozen=True)
class Credentials:
    """A user and secret for one registry, where they came from, or a note on why none."""

    user: str | None = None
    secret: str | None = None
    source: str | None = None  # the file, or the helper and where it was named
    note: str | None = None  # why none: a helper without an entry, one that failed
    identity_token: str | None = None  # an OAuth2 refresh token for the token endpoint

    @property
    def basic(self) -> str | None:
        if self.user is None or self.secret is None:
            return None
        return "Basic " + base64.b64encode(f"{self.user}:{self.secret}".encode()).decode()

    @property
    def usable(self) -> bool:
        return self.basic is not None or bool(self.identity_token)


def auth_files(env: Mapping[str, str]) -> list[str]:
    """The credential files in the order they are searched."""
    home = env.get("HOME") or os.path.expanduser("~")
    files = []
    if env.get("REGISTRY_AUTH_FILE"):
        files.append(env["REGISTRY_AUTH_FILE"])
    if env.get("XDG_RUNTIME_DIR"):
        files.append(os.path.join(env["XDG_RUNTIME_DIR"], "containers", "auth.json"))
    files.append(os.path.join(home, ".config", "containers", "auth.json"))
    docker = env.get("DOCKER_CONFIG") or os.path.join(home, ".docker")
    files.append(os.path.join(docker, "config.json"))
    return files


def _key_scope(key: str) -> str:
    """An ``auths`` key as HOST[/PATH] without scheme, Docker Hub's spellings as docker.io."""
    key = re.sub(r"^[a-z]+://", "", key.strip()).rstrip("/")
    host, slash, path = key.partition("/")
    if host in _HUB_ALIASES:
        return DOCKER_HUB  # "https://index.docker.io/v1/" is Docker Hub's key, not a path
    return f"{host}{slash}{path}"


def _matches(scope: str, ref: Reference) -> int:
    """How specific a key's scope is for ``ref`` (0: not for it)."""
    target = f"{ref.host}/{ref.repository}"
    if scope == ref.host or target == scope or target.startswith(scope + "/"):
        return len(scope)
    return 0


def _entry_credentials(entry: object, source: str) -> Credentials | None:
    if not isinstance(entry, dict):
        return None
    user, secret = entry.get("username"), entry.get("password")
    encoded = entry.get("auth")
    if isinstance(encoded, str) and encoded:
        try:
            user, _, secret = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return Credentials(source=source, note=f"{source}: the auth entry is not base64")
    token = entry.get("identitytoken")
    if isinstance(token, str) and token:  # docker login writes it in place of a password
        return Credentials(source=source, identity_token=token)
    if isinstance(user, str) and isinstance(secret, str) and user:
        return Credentials(user, secret, source)
    return None


def helper_server_url(ref: Reference) -> str:
    """What a helper is asked for: docker's key for the registry (Docker Hub's v1 URL)."""
    return HUB_SERVER_URL if ref.host == DOCKER_HUB else ref.host


def _helper_for(doc: dict[str, object], ref: Reference, path: str) -> tuple[str, str] | None:
    """The helper a file names for ``ref`` (the credHelpers entry for its host, else
    credsStore) and how it was named; None when it names none."""
    helpers = doc.get("credHelpers")
    if isinstance(helpers, dict):
        for key, name in helpers.items():
            if _key_scope(key) == ref.host and isinstance(name, str) and name:
                return name, f"credHelpers[{key!r}] in {path}"
    store = doc.get("credsStore")
    if isinstance(store, str) and store:
        return store, f"credsStore in {path}"
    return None


def _from_auths(doc: dict[str, object], ref: Reference, path: str) -> Credentials:
    """The most specific ``auths`` entry for ``ref`` (empty, with a note when one is bad)."""
    auths = doc.get("auths") if isinstance(doc.get("auths"), dict) else {}
    assert isinstance(auths, dict)
    ranked = sorted(((_matches(_key_scope(k), ref), k) for k in auths), key=lambda pair: -pair[0])
    notes = []
    for rank, key in ranked:
        found = _entry_credentials(auths[key], path) if rank else None
        if found and found.usable:
            return found
        if found and found.note:
            notes.append(found.note)
    return Credentials(note="; ".join(notes) or None)


def _from_file(
    path: str, ref: Reference, env: Mapping[str, str], timeout: float
) -> Credentials | None:
    """What one file gives for ``ref``: its helper's answer if it names one, else its
    ``auths`` entry; None when the file cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    helper = _helper_for(doc, ref, path)
    if helper is None:
        return _from_auths(doc, ref, path)
    name, origin = helper
    answer = run_helper(name, helper_server_url(ref), origin, env, timeout)
    source = f"docker-credential-{name} ({origin})"
    return Credentials(answer.user, answer.secret, source, answer.note, answer.identity_token)


def find_credentials(
    ref: Reference,
    env: Mapping[str, str] | None = None,
    helper_timeout: float = HELPER_TIMEOUT,
    system_dir: str | None = None,
) -> Credentials:
    """The user's credentials for ``ref``: from each of registries.conf's
    ``credential-helpers`` in order (by default the auth files alone; ``system_dir`` instead of
    /etc/containers), the first that has some. Empty ``Credentials``, with notes, when none;
    never raises."""
    env = os.environ if env is None else env
    setting = credential_helpers(env, system_dir)
    notes = list(setting.notes)
    for helper in setting.helpers:
        if helper == AUTH_FILES:
            found = _from_auth_files(ref, env, helper_timeout)
        else:  # containers/image asks it for the registry's host (docker.io for Docker Hub)
            origin = f"credential-helpers in {setting.origin}"
            answer = run_helper(helper, ref.host, origin, env, helper_timeout)
            source = f"docker-credential-{helper} ({origin})"
            found = Credentials(
                answer.user, answer.secret, source, answer.note, answer.identity_token
            )
        if found.usable:
            return found
        if found.note:
            notes.append(found.note)
    return Credentials(note="; ".join(notes) or None)


def _from_auth_files(ref: Reference, env: Mapping[str, str], timeout: float) -> Credentials:
    """The first usable credentials the auth files give for ``ref`` (with notes when none)."""
    notes: list[str] = []
    for path in auth_files(env):
        found = _from_file(path, ref, env, timeout)
        if found is not None and found.usable:
            return found
        if found is not None and found.note:
            notes.append(found.note)
    return Credentials(note="; ".join(notes) or None)


_CHALLENGE = re.compile(r'(\w+)\s*=\s*(?:"([^"]*)"|([^\s,]*))')


@dataclass(frozen=True)
class Challenge:
    """A ``WWW-Authenticate`` answer: the scheme and its parameters."""

    scheme: str  # "bearer" or "basic" (lowercase)
    params: Mapping[str, str]


def parse_challenge(header: str | None) -> Challenge | None:
    """``Bearer realm="...",service="...",scope="..."`` or ``Basic realm="..."``."""
    if not header:
        return None
    scheme, _, rest = header.strip().partition(" ")
    params = {m.group(1).lower(): m.group(2) or m.group(3) or "" for m in _CHALLENGE.finditer(rest)}
    return Challenge(scheme.lower(), params)
