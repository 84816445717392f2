"""Docker credential helpers: ``docker-credential-NAME get``, run as docker and skopeo run them.

The protocol (docker/docker-credential-helpers ``client/client.go`` ``Get``): the helper reads the
server URL on stdin and prints ``{"ServerURL", "Username", "Secret"}`` on stdout; a helper with
nothing stored prints ``credentials not found in native keychain`` (``credentials/error.go``)
and exits non-zero, which docker treats as "not logged in" (docker/cli
``cli/config/credentials/native_store.go`` ``getCredentialsFromStore``), and so does archgap:
anonymous access. ``Username`` ``<token>`` means ``Secret`` is an identity token (an OAuth2
refresh token, ``tokenUsername`` there), used by ``registry.RegistryClient`` for the token
endpoint's ``grant_type=refresh_token``.

The server URL is docker's key for the registry: ``https://index.docker.io/v1/`` for Docker Hub
(``authConfigKey`` in docker/cli ``cli/command/registry.go``), else ``HOST[:PORT]``.

Every failure is a note, never an exception: a helper that is not on ``PATH``, one that fails,
prints something that is not the JSON above, or does not answer within the timeout (the helper's
process group is killed then: a shell script's children too).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

from archgap.probe.environment.system import communicate, spawn, stop_process_group

HELPER_TIMEOUT = 30.0
TOKEN_USERNAME = "<token>"
NOT_FOUND = "credentials not found in native keychain"
HUB_SERVER_URL = "https://index.docker.io/v1/"


@dataclass(frozen=True)
class HelperAnswer:
    """What a helper said: a user and secret, an identity token, or a note on why neither."""

    user: str | None = None
    secret: str | None = None
    identity_token: str | None = None
    note: str | None = None


def _tail(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text if len(text) <= 300 else "..." + text[-300:]


def _parse(out: bytes, what: str, server_url: str) -> HelperAnswer:
    try:
        doc = json.loads(out)
    except ValueError:
        return HelperAnswer(note=f"{what} printed no credentials JSON: {_tail(out)!r}")
    user = doc.get("Username") if isinstance(doc, dict) else None
    secret = doc.get("Secret") if isinstance(doc, dict) else None
    if not isinstance(user, str) or not isinstance(secret, str):
        return HelperAnswer(note=f"{what} printed JSON without Username and Secret strings")
    if not user and not secret:  # docker-credential-pass 0.6 answers "not stored" this way
        return HelperAnswer(note=f"{what} has no credentials for {server_url}")
    if user == TOKEN_USERNAME:
        return HelperAnswer(identity_token=secret)
    return HelperAnswer(user=user, secret=secret)


def run_helper(
    name: str,
    server_url: str,
    origin: str,
    env: Mapping[str, str] | None = None,
    timeout: float = HELPER_TIMEOUT,
) -> HelperAnswer:
    """``docker-credential-NAME get`` for ``server_url``; ``origin`` says where it was named
    (for the notes). Never raises."""
    program = f"docker-credential-{name}"
    what = f"{program} ({origin})"
    try:
        # Its own process group (spawn): a timeout ends it and its children.
        proc = spawn([program, "get"], dict(os.environ if env is None else env), stdin=True)
    except OSError as exc:
        reason = "is not on PATH" if isinstance(exc, FileNotFoundError) else f"cannot run: {exc}"
        return HelperAnswer(note=f"{what} {reason}")
    out, err, stopped = communicate(proc, server_url.encode(), timeout)
    if stopped is not None:
        stop_process_group(proc)
        if stopped == "timeout":
            return HelperAnswer(note=f"{what} did not answer within {timeout:g} s")
        return HelperAnswer(note=f"{what} stopped: {stopped}")
    if proc.returncode != 0:
        if out.decode("utf-8", "replace").strip() == NOT_FOUND:
            return HelperAnswer(note=f"{what} has no credentials for {server_url}")
        said = _tail(out) or _tail(err) or "no output"
        return HelperAnswer(note=f"{what} failed (exit {proc.returncode}): {said}")
    return _parse(out, what, server_url)
