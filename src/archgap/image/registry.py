"""``docker://REF``: images read from a registry over the v2 API, with the standard library only.

* **Manifests** are asked for with every type archgap reads (OCI index and manifest, Docker
  manifest list and schema 2) and resolved to one platform's image by ``source.resolve`` (the
  same index selection as an OCI layout's); one fetched by digest is checked against it.
* **Auth** follows the registry's ``WWW-Authenticate`` answer: ``Basic`` with the user's
  credentials, or ``Bearer`` per the Docker token spec (GET realm?service=...&scope=... with the
  credentials, if any; with an identity token, the OAuth2 form POST ``grant_type=refresh_token``
  of distribution's ``docs/spec/auth/oauth.md``, as docker's client does). Credentials come from
  the user's docker/containers files and the credential helpers they name (``registry_auth``).
* **Token renewal**: a token is asked for again before its ``expires_in`` (60 s when the answer
  omits it, as the token spec says) has passed since it was requested, and when the registry
  answers 401 to a request that carried one (a token the registry holds expired: clock skew, a
  shorter life than announced); the request is then retried once. A ``refresh_token`` in a
  token answer (OAuth2 servers that rotate refresh tokens send a new one with each grant, and
  the old one is spent) is kept in memory for this run, per realm and service, and the next
  renewal is the refresh grant with it; it is never written anywhere nor put in a message.
* **Blobs** are streamed and checked as they are read (``source.verified``: a layer read to its
  end had the manifest's size and digest); a broken connection is a ``BlobError`` (an
  ``OSError``). Each is copied as it streams into the user's cache, by digest
  (``$XDG_CACHE_HOME/archgap/blobs/sha256/HEX``), kept only when read to its end and verified:
  the layer reader's second pass and later runs read it there (nothing is extracted; tags are
  asked for again every run). Redirects (registries hand blobs to a CDN or an object store) are
  followed; ``Authorization`` goes only to the registry's own origin.
* **Plain HTTP** only for an insecure registry, as skopeo's ``--tls-verify=false`` and docker's
  loopback rule: a loopback host (``localhost``, ``127.0.0.0/8``, ``::1``) or ``tls_verify=False``
  tries HTTPS without verifying the certificate, then HTTP.

Every failure is a ``RegistryError`` (a ``FetchError``; an ``ImageError`` from the source) whose
message names the reference and the reason: access refused (401/403, with where credentials were
looked for), an unknown manifest or repository (404), an unreachable host.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import io
import ipaddress
import json
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import IO, Any

from archgap.image.registry_auth import (
    BadReference,
    Challenge,
    Credentials,
    Reference,
    auth_files,
    find_credentials,
    parse_challenge,
    parse_reference,
)
from archgap.image.source import (
    DOCKER_LIST,
    DOCKER_MANIFEST,
    INDEX_TYPES,
    MANIFEST_TYPES,
    MAX_JSON_BYTES,
    OCI_INDEX,
    OCI_MANIFEST,
    Blob,
    ImageError,
    ImageManifest,
    Platform,
    check_digest,
    resolve,
    verified,
)
from archgap.index import net
from archgap.index.fetch import FetchError, PartialFile, cache_dir
from archgap.probe.environment.envvars import hide_url_password

ACCEPT = ", ".join((OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST))
CHUNK = 1 << 20
# Docker Hub's registry hands out tokens from its own token server (docker's client sends the
# credentials there: https://distribution.github.io/distribution/spec/auth/token/)
KNOWN_REALMS = {"registry-1.docker.io": "auth.docker.io"}
DEFAULT_TOKEN_LIFETIME = 60.0  # expires_in when the token answer omits it (token spec)
BLOB_MIN_RATE = 1 << 20  # bytes/s: a blob's request may take the timeout plus 1 s per MiB
OAUTH_CLIENT_ID = "archgap"  # the spec's client_id: any meaningful name, for auditing


class RegistryError(FetchError):
    """A registry request that failed; ``kind`` is one of auth, not-found, unreachable,
    protocol (an answer that is not what the v2 API promises)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class BlobError(OSError):
    """A blob stream that ended early, ran long or had another digest."""


def is_loopback(host: str) -> bool:
    name = urllib.parse.urlsplit(f"//{host}").hostname or ""
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _registry_message(exc: urllib.error.HTTPError) -> str:
    """The v2 error body's codes and messages, when it has them."""
    try:
        doc = json.loads(exc.read(65536) or b"{}")
        errors = doc.get("errors") if isinstance(doc, dict) else None
        if isinstance(errors, list) and errors:
            return "; ".join(
                f"{e.get('code', '')}: {e.get('message', '')}".strip(": ")
                for e in errors
                if isinstance(e, dict)
            )
    except (ValueError, OSError):
        pass
    return str(exc.reason)


def _token_key(challenge: Challenge) -> tuple[str, str]:
    """What a refresh token is kept by: the token server's realm and the service."""
    return challenge.params.get("realm", ""), challenge.params.get("service", "")


class RegistryClient:
    """One repository on one registry (tokens are per repository scope)."""

    def __init__(
        self,
        ref: Reference,
        tls_verify: bool = True,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ref = ref
        self.env = env
        self.credentials: Credentials = find_credentials(ref, env)
        self.insecure = not tls_verify or is_loopback(ref.api_host)
        self.timeout = net.session().timeout if timeout is None else timeout
        self.clock = clock
        self.authorization: str | None = None
        self.challenge: Challenge | None = None  # the Bearer challenge the token answered
        self.token_expires = 0.0  # by ``clock``
        # refresh tokens token answers returned, by (realm, service): in memory only
        self._refresh: dict[tuple[str, str], str] = {}
        self.tokens = 0  # tokens fetched (the first, then each renewal)
        self.tokens_refused = 0  # 401 answers to a request that carried a token
        self.scheme: str | None = None
        context = ssl.create_default_context()
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        self.opener = net.opener(context)
        self.withheld: str | None = None  # why credentials were not sent to a token realm

    @property
    def label(self) -> str:
        return str(self.ref)

    # -- requests ---------------------------------------------------------------------------

    def _url(self, scheme: str, path: str) -> str:
        return f"{scheme}://{self.ref.api_host}/v2/{self.ref.repository}/{path}"

    def _open(
        self, path: str, accept: str | None, timeout: float | None = None
    ) -> http.client.HTTPResponse:
        """GET a path under the repository, choosing the scheme on the first call, and
        authenticating when the registry asks for it (again when a token expired)."""
        if self.challenge is not None and self.clock() >= self.token_expires:
            self.authorization = self._authenticate(self.challenge)  # due: renewed before use
        for attempt in range(2):
            try:
                return self._open_once(path, accept, timeout)
            except urllib.error.HTTPError as exc:
                if exc.code != 401 or attempt:
                    raise self._http_error(path, exc) from None
                challenge = parse_challenge(exc.headers.get("WWW-Authenticate"))
                exc.close()
                self.tokens_refused += bool(self.challenge and self.authorization)
                self.authorization = self._authenticate(challenge)
        raise AssertionError("unreachable")  # pragma: no cover

    def _open_once(
        self, path: str, accept: str | None, timeout: float | None = None
    ) -> http.client.HTTPResponse:
        schemes = (
            [self.scheme] if self.scheme else ["https", "http"] if self.insecure else ["https"]
        )
        for i, scheme in enumerate(schemes):
            url = self._url(scheme, path)
            req = self._request(url, {"Accept": accept} if accept else None, timeout)
            if self.authorization:
                req.add_unredirected_header("Authorization", self.authorization)
            try:
                answer = net.send(req, self.opener)
            except urllib.error.HTTPError:
                self.scheme = scheme
                raise
            except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
                if i + 1 < len(schemes):
                    continue  # an insecure registry that does not speak TLS: plain HTTP next
                raise RegistryError(
                    f"{self.label}: cannot reach {self.ref.api_host}: {net.describe(url, exc)}",
                    "unreachable",
                ) from None
            self.scheme = scheme
            return answer
        raise AssertionError("unreachable")  # pragma: no cover

    def _request(
        self, url: str, headers: dict[str, str] | None = None, timeout: float | None = None
    ) -> urllib.request.Request:
        seconds = self.timeout if timeout is None else timeout
        return net.build_request(url, headers, seconds, credentials=False)

    def _where(self) -> str:
        if self.withheld:
            return self.withheld
        if self.challenge and _token_key(self.challenge) in self._refresh:
            first = self.credentials.source if self.credentials.identity_token else None
            since = f" for the identity token from {first}" if first else ""
            return f"with the refresh token the token server returned{since}"
        if self.credentials.source and self.credentials.identity_token:
            return f"with the identity token from {self.credentials.source}"
        if self.credentials.source and self.credentials.usable:
            return (
                f"with the credentials of {self.credentials.user!r} from {self.credentials.source}"
            )
        looked = ", ".join(auth_files(os.environ if self.env is None else self.env))
        note = f"; {self.credentials.note}" if self.credentials.note else ""
        return f"without credentials (none for {self.ref.host} in {looked}{note})"

    def _http_error(self, path: str, exc: urllib.error.HTTPError) -> RegistryError:
        message = _registry_message(exc)
        exc.close()
        collection, _, name = path.partition("/")
        what = f"{self.label}: {collection.rstrip('s')} {name}"  # "manifest v1", "blob sha256:..."
        if exc.code in (401, 403):
            return RegistryError(
                f"{self.label}: the registry refused access (HTTP {exc.code}: {message}) "
                f"{self._where()}",
                "auth",
            )
        if exc.code == 404:
            return RegistryError(f"{what} not found (HTTP 404: {message})", "not-found")
        return RegistryError(f"{what}: HTTP {exc.code} {message}", "protocol")

    def _authenticate(self, challenge: Challenge | None) -> str:
        """The Authorization value the challenge asks for; raises RegistryError."""
        basic = self.credentials.basic
        if challenge is None or challenge.scheme not in ("basic", "bearer"):
            scheme = challenge.scheme if challenge else "no WWW-Authenticate"
            raise RegistryError(
                f"{self.label}: HTTP 401 with {scheme}: cannot authenticate", "auth"
            )
        if challenge.scheme == "basic":
            if basic is None:
                raise RegistryError(
                    f"{self.label}: the registry asks for a user and password, {self._where()}",
                    "auth",
                )
            return basic
        return self._bearer(challenge, basic)

    def _bearer(self, challenge: Challenge, basic: str | None) -> str:
        """``Bearer TOKEN`` from the challenge's realm; notes when the token is due again."""
        asked = self.clock()  # the token's life is counted from before it was asked for
        doc = self._token_answer(challenge, basic)
        token = doc.get("token") or doc.get("access_token")
        if not isinstance(token, str) or not token:
            realm = challenge.params.get("realm")
            raise RegistryError(f"{self.label}: the token server {realm} sent no token", "protocol")
        refresh = doc.get("refresh_token")
        if isinstance(refresh, str) and refresh:
            self._refresh[_token_key(challenge)] = refresh
        lifetime = doc.get("expires_in")
        if isinstance(lifetime, bool) or not isinstance(lifetime, (int, float)) or lifetime <= 0:
            lifetime = DEFAULT_TOKEN_LIFETIME
        self.challenge, self.token_expires = challenge, asked + lifetime
        self.tokens += 1
        return "Bearer " + token

    def _token_request(self, challenge: Challenge, basic: str | None) -> urllib.request.Request:
        """The token request: GET with Basic credentials (or none), or, with an identity
        token, the OAuth2 POST (the scope space-separated, client_id required)."""
        realm = challenge.params.get("realm", "")
        if not realm.startswith(("https://", "http://")):
            raise RegistryError(f"{self.label}: token realm {realm!r} is not a URL", "protocol")
        query = {"scope": challenge.params.get("scope") or f"repository:{self.ref.repository}:pull"}
        if challenge.params.get("service"):
            query["service"] = challenge.params["service"]
        refresh = self._refresh.get(_token_key(challenge)) or self.credentials.identity_token
        if (refresh or basic) and not self._may_send_credentials(realm):
            refresh = basic = None  # asked for anonymously: the realm may not see them
        if refresh:
            form = {**query, "grant_type": "refresh_token", "refresh_token": refresh}
            req = self._request(realm, {"Content-Type": "application/x-www-form-urlencoded"})
            req.data = urllib.parse.urlencode({**form, "client_id": OAUTH_CLIENT_ID}).encode()
            return req
        req = self._request(f"{realm}{'&' if '?' in realm else '?'}{urllib.parse.urlencode(query)}")
        if basic:
            req.add_unredirected_header("Authorization", basic)
        return req

    def _may_send_credentials(self, realm: str) -> bool:
        """Whether the token realm may have the user's credentials: one on the registry's own
        host (over https, or plain http when the registry itself is spoken to so), Docker
        Hub's own token server, or with ``trust_token_realm`` any https realm; never one in
        clear text on another host. When not, ``withheld`` says why (the refusal names it)."""
        parts = urllib.parse.urlsplit(realm)
        host = urllib.parse.urlsplit(f"//{self.ref.api_host}").hostname
        tls = parts.scheme == "https"
        if parts.hostname == host and (tls or self.scheme == "http"):
            return True
        if tls and (
            KNOWN_REALMS.get(host or "") == parts.hostname or net.session().trust_token_realm
        ):
            return True
        how = "in clear text" if not tls else "to another host"
        self.withheld = (
            f"without credentials: not sent {how} to the token realm {hide_url_password(realm)} "
            f"(credentials go to a realm on {host} itself"
            f"{'' if not tls else ', or with --trust-token-realm'})"
        )
        return False

    def _token_answer(self, challenge: Challenge, basic: str | None) -> dict[str, Any]:
        req = self._token_request(challenge, basic)
        realm = challenge.params.get("realm", "")
        try:
            with net.send(req, self.opener) as answer:
                doc = json.loads(net.read_capped(answer, MAX_JSON_BYTES, realm))
        except urllib.error.HTTPError as exc:
            exc.close()
            # OAuth2 answers a refused grant with 400 (invalid_grant)
            oauth = self.credentials.identity_token or _token_key(challenge) in self._refresh
            refused = (401, 403, 400) if oauth else (401, 403)
            raise RegistryError(
                f"{self.label}: the token server {realm} refused (HTTP {exc.code}) {self._where()}",
                "auth" if exc.code in refused else "protocol",
            ) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
            raise RegistryError(
                f"{self.label}: token: {net.describe(realm, exc)}", "unreachable"
            ) from None
        if not isinstance(doc, dict):
            raise RegistryError(f"{self.label}: the token server {realm} sent no token", "protocol")
        return doc

    # -- manifests and blobs ----------------------------------------------------------------

    def manifest_bytes(self, reference: str | None = None) -> tuple[bytes, str]:
        """The manifest (or index) at a tag or digest (default: the reference's) as sent, and
        the media type the registry gave; checked against the digest when asked by digest."""
        reference = reference or self.ref.reference
        with self._open(f"manifests/{reference}", ACCEPT) as answer:
            raw = answer.read(MAX_JSON_BYTES + 1)
            media_type = (answer.headers.get("Content-Type") or "").split(";")[0].strip()
        if len(raw) > MAX_JSON_BYTES:
            raise RegistryError(f"{self.label}: manifest over {MAX_JSON_BYTES} bytes", "protocol")
        algorithm, _, expected = reference.partition(":")
        if (
            algorithm in ("sha256", "sha512")
            and hashlib.new(algorithm, raw).hexdigest() != expected
        ):
            raise RegistryError(
                f"{self.label}: the manifest sent for {reference} has another digest", "protocol"
            )
        return raw, media_type

    def open_blob(self, digest: str, size: int = 0) -> IO[bytes]:
        """The blob's bytes as the registry streams them (``BlobError`` where the connection
        breaks, or the deadline passes: the timeout plus a second per MiB of ``size``); the
        caller checks size and digest (``source.verified``)."""
        deadline = self.timeout + size / BLOB_MIN_RATE  # a layer of gigabytes takes a while
        answer = self._open(f"blobs/{digest}", None, deadline)
        return io.BufferedReader(_Body(answer, digest), CHUNK)


class _Body(io.RawIOBase):
    """An answer's body whose transport failures are ``BlobError`` (an ``OSError``)."""

    def __init__(self, answer: http.client.HTTPResponse, digest: str) -> None:
        super().__init__()
        self.answer, self.digest, self.seen = answer, digest, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            n = self.answer.readinto(buffer)
        except (http.client.HTTPException, OSError) as exc:
            raise BlobError(
                f"blob {self.digest}: the connection broke after {self.seen} bytes "
                f"({type(exc).__name__}: {exc})"
            ) from None
        self.seen += n
        return n

    def close(self) -> None:
        self.answer.close()
        super().close()


def blob_cache_path(digest: str) -> str:
    """Where a blob is cached: by its digest (content-addressed: valid for any registry)."""
    algorithm, _, hexdigest = digest.partition(":")
    return os.path.join(cache_dir("blobs"), algorithm, hexdigest)


class _CacheCopy(io.RawIOBase):
    """A verified stream, copied into the cache as it is read: the copy becomes the cache file
    when the stream ends (the digest was checked then); a stream closed early, a failed check or
    a cache that cannot be written leaves nothing behind, and never fails the read."""

    def __init__(self, stream: IO[bytes], target: str) -> None:
        super().__init__()
        self.stream = stream
        self.partial: PartialFile | None = None
        with contextlib.suppress(OSError):  # no cache then; the read goes on
            self.partial = PartialFile(target)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.stream.read(len(buffer))
        if not data:
            self._finish(commit=True)
            return 0
        buffer[: len(data)] = data
        if self.partial is not None:
            try:
                self.partial.write(data)
            except OSError:
                self._finish(commit=False)
        return len(data)

    def _finish(self, commit: bool) -> None:
        partial, self.partial = self.partial, None
        if partial is None:
            return
        try:
            partial.commit() if commit else partial.discard()
        except OSError:
            partial.discard()

    def close(self) -> None:
        try:
            self.stream.close()
        finally:
            self._finish(commit=False)
            super().close()


class RegistrySource:
    """``docker://REF`` as an ``ImageSource``: the manifest for a platform (the registry's
    index resolved by ``source.resolve``) and layer streams checked by ``source.verified``."""

    def __init__(self, target: str, tls_verify: bool = True) -> None:
        self.label = target
        try:
            self.client = RegistryClient(parse_reference(target), tls_verify)
        except BadReference as exc:
            raise ImageError(str(exc)) from None

    def manifest(self, platform: Platform | None) -> ImageManifest:
        try:
            top, media_type = self.client.manifest_bytes()
            return resolve(top, media_type, self._read, platform, self.label)
        except RegistryError as exc:
            raise ImageError(str(exc)) from None

    def _read(self, blob: Blob) -> bytes:
        """An index's, a manifest's or a config's bytes, checked against the descriptor."""
        what = f"{self.label}: {blob.digest}"
        if blob.media_type in INDEX_TYPES | MANIFEST_TYPES:
            data, _ = self.client.manifest_bytes(blob.digest)
            return check_digest(data, blob, what)
        if blob.size > MAX_JSON_BYTES:
            raise ImageError(f"{what}: {blob.size} bytes, not an image's JSON")
        try:
            with self.open_blob(blob) as stream:
                return check_digest(stream.read(), blob, what)
        except BlobError as exc:
            raise ImageError(f"{self.label}: {exc}") from None

    def open_blob(self, blob: Blob) -> IO[bytes]:
        """The blob from the cache when an earlier read completed it, else from the registry,
        copied into the cache as it streams (kept only once read to its end and verified):
        the layer reader's second pass, and the next run, download nothing again."""
        what = f"{self.label}: blob {blob.digest}"
        cached = blob_cache_path(blob.digest)
        try:
            return verified(open(cached, "rb"), blob, f"{what} (cached in {cached})")
        except OSError:
            pass
        try:
            raw = self.client.open_blob(blob.digest, blob.size)
        except RegistryError as exc:
            raise ImageError(str(exc)) from None
        return io.BufferedReader(_CacheCopy(verified(raw, blob, what), cached), CHUNK)

    def close(self) -> None:
        """Connections are not kept between requests."""
