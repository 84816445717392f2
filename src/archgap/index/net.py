"""Every HTTP request archgap makes for an index page, a wheel, a metadata file or a registry:
one deadline, one byte cap, credentials as pip sends them, and URLs that never show a password.

* **Credentials**: a URL's ``user:password@`` (percent-encoded, as pip takes it) is moved into
  an ``Authorization: Basic`` header and remembered for its host and port, so the wheels an
  index lists on the same host get them too (pip's ``MultiDomainBasicAuth``); else ``~/.netrc``
  (``$NETRC``) for the host, as pip (through requests) reads it. The header is never forwarded
  to another origin on a redirect.
* **Redaction**: ``hide_url_password`` (``archgap.probe.environment.envvars``: the probe's diffs
  hide URL passwords by the same rule, pip's ``redact_auth_from_url``) owns it. ``admit`` is the
  way in: a URL given by the user or listed by an index is remembered with its credentials and
  handed back redacted, so the password is in no label, message, JSON document or cache name. A URL
  whose authority is not ``host[:port]`` (RFC 3986 ends it at the first ``/``, so a password
  with an unencoded ``/`` is read as a port, as pip reads it) is refused with that reason.
* **Deadline**: ``timeout`` bounds the whole request (connection, headers and a trickling body):
  before each read of the socket its timeout is set to what is left of the deadline.
* **Caps**: a body past its cap (``MAX_PAGE_BYTES`` for pages and JSON, ``Session.max_download``
  for a wheel) is refused with the reason, before reading when ``Content-Length`` says so.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import functools
import http.client
import io
import netrc
import os
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from archgap.probe.environment.envvars import URL_MASK, hide_url_password

DEFAULT_TIMEOUT = 60.0
MAX_PAGE_BYTES = 32 << 20  # an index page, PEP 658 metadata, a token or manifest answer
MAX_DOWNLOAD_BYTES = 4 << 30  # a wheel downloaded whole (CUDA wheels reach ~3 GiB)
USER_AGENT = "archgap (wheel reader; https://github.com/archgap)"


class NetError(OSError):
    """A request that failed; the message is one line naming the (redacted) URL and why."""


@dataclass
class Session:
    """The limits of one run's requests, and the credentials its URLs carried, by host:port."""

    timeout: float = DEFAULT_TIMEOUT
    max_download: int = MAX_DOWNLOAD_BYTES
    credentials: dict[str, tuple[str, str]] = field(default_factory=dict)
    # the authorities (as shown) of admitted URLs that cannot be requested, and why: URLs
    # made from them (a project page under an index URL) are refused too
    refused: dict[str, str] = field(default_factory=dict)
    # docker:// registries: send credentials to a token realm on another host (https only)
    trust_token_realm: bool = False


_SESSION: contextvars.ContextVar[Session] = contextvars.ContextVar("archgap_net_session")


def session() -> Session:
    try:
        return _SESSION.get()
    except LookupError:
        current = Session()
        _SESSION.set(current)
        return current


@contextlib.contextmanager
def limits(
    timeout: float | None = None,
    max_download: int | None = None,
    trust_token_realm: bool | None = None,
) -> Iterator[Session]:
    """Requests inside use this deadline, download cap and realm rule (credentials admitted
    so far stay)."""
    outer = session()
    inner = Session(
        outer.timeout if timeout is None else timeout,
        outer.max_download if max_download is None else max_download,
        outer.credentials,
        outer.refused,
        outer.trust_token_realm if trust_token_realm is None else trust_token_realm,
    )
    token = _SESSION.set(inner)
    try:
        yield inner
    finally:
        _SESSION.reset(token)


# -- credentials and redaction ----------------------------------------------------------------


def _split_netloc(netloc: str) -> tuple[str, str | None, str | None]:
    """(host[:port], user, password) of a netloc, the userinfo percent-decoded."""
    userinfo, at, hostport = netloc.rpartition("@")
    if not at:
        return netloc, None, None
    user, colon, password = userinfo.partition(":")
    return (
        hostport,
        urllib.parse.unquote(user),
        urllib.parse.unquote(password) if colon else None,
    )


_BAD_AUTHORITY = (
    "its authority (up to the first '/', '?' or '#') is not [user[:password]@]host[:port]: "
    "a '/', '?' or '#' in a user name or password is written %2F, %3F or %23 (RFC 3986)"
)


def _authority_problem(url: str) -> str | None:
    """Why ``url`` cannot be requested as pip would read it, or None. Never quotes the
    authority: a password with an unencoded '/' is what ends up as its port."""
    try:
        urllib.parse.urlsplit(url).port  # noqa: B018 (urllib checks the port only when asked)
    except ValueError:
        return _BAD_AUTHORITY
    return None


def admit(url: str) -> str:
    """``url`` redacted; its credentials (not already masked) kept for its host:port, or,
    when it cannot be requested, why (``build_request`` refuses it)."""
    shown = hide_url_password(url)
    problem = _authority_problem(url)
    if problem is not None:
        session().refused[urllib.parse.urlsplit(shown).netloc] = problem
        return shown
    hostport, user, password = _split_netloc(urllib.parse.urlsplit(url).netloc)
    if user is not None and password != URL_MASK and (user, password) != (URL_MASK, None):
        session().credentials[hostport.lower()] = (user, password or "")
    return shown


def _netrc_credentials(host: str) -> tuple[str, str] | None:
    """(login, password) for the host in ``$NETRC`` or ``~/.netrc``, as requests reads them
    for pip (a ``default`` entry too); None when there is none or the file is unreadable."""
    candidates = [os.environ["NETRC"]] if os.environ.get("NETRC") else []
    candidates += [os.path.expanduser("~/.netrc"), os.path.expanduser("~/_netrc")]
    for path in candidates:
        if not os.path.isfile(path):
            continue
        try:
            entry = netrc.netrc(path).authenticators(host)
        except (OSError, netrc.NetrcParseError, UnicodeDecodeError):
            return None
        if entry:
            login = entry[0] or entry[1] or ""
            return login, entry[2] or ""
        return None
    return None


def authorization(url: str) -> tuple[str, str | None]:
    """(the URL without userinfo, its ``Authorization`` value): the URL's own credentials,
    those admitted for its host:port, else netrc's for its host."""
    parts = urllib.parse.urlsplit(url)
    hostport, user, password = _split_netloc(parts.netloc)
    bare = urllib.parse.urlunsplit(parts._replace(netloc=hostport))
    found = session().credentials.get(hostport.lower())
    if found is None and user is not None and URL_MASK not in (user, password):
        found = (user, password or "")
    if found is None and parts.hostname and parts.scheme in ("http", "https"):
        found = _netrc_credentials(parts.hostname)
    if found is None:
        return bare, None
    token = base64.b64encode(f"{found[0]}:{found[1]}".encode()).decode()
    return bare, f"Basic {token}"


# -- one deadline for a request ---------------------------------------------------------------


class Deadline:
    """When a request must have finished; ``left`` raises ``TimeoutError`` once it passed."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        remaining = self.end - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no complete answer within {self.seconds:.3g} s")
        return remaining


class _DeadlineReader(io.RawIOBase):
    """A socket's read side whose every read waits at most what is left of the deadline."""

    def __init__(self, raw: socket.SocketIO, sock: socket.socket, deadline: Deadline) -> None:
        super().__init__()
        self.raw, self.sock, self.deadline = raw, sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self.sock.settimeout(self.deadline.left())
        try:
            return self.raw.readinto(buffer) or 0  # None: no data yet (never: blocking)
        except TimeoutError:  # the socket waited all that was left
            raise TimeoutError(f"no complete answer within {self.deadline.seconds:.3g} s") from None

    def close(self) -> None:
        self.raw.close()
        super().close()


class _DeadlineSocket:
    """A connected socket whose reads and writes share the request's deadline."""

    def __init__(self, sock: socket.socket, deadline: Deadline) -> None:
        self._sock, self._deadline = sock, deadline

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def sendall(self, data: bytes) -> None:
        self._sock.settimeout(self._deadline.left())
        self._sock.sendall(data)

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> IO[bytes]:
        raw = self._sock.makefile("rb", buffering=0)
        return io.BufferedReader(_DeadlineReader(raw, self._sock, self._deadline))


class _DeadlineConnection(http.client.HTTPConnection):
    def __init__(self, *args: Any, deadline: Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deadline = deadline

    def connect(self) -> None:
        super().connect()
        self.sock = _DeadlineSocket(self.sock, self.deadline)


class _DeadlineTLSConnection(_DeadlineConnection, http.client.HTTPSConnection):
    """HTTPS: HTTPSConnection.connect wraps the socket in TLS, then the deadline wraps that."""


def _deadline_of(req: urllib.request.Request) -> Deadline:
    found = getattr(req, "deadline", None)
    return found if isinstance(found, Deadline) else Deadline(req.timeout or DEFAULT_TIMEOUT)


class _HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = functools.partial(_DeadlineConnection, deadline=_deadline_of(req))
        return self.do_open(connection, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        super().__init__(context=context)
        self.context = context

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = functools.partial(_DeadlineTLSConnection, deadline=_deadline_of(req))
        return self.do_open(connection, req, context=self.context)


def _origin(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme, parts.netloc


class Redirects(urllib.request.HTTPRedirectHandler):
    """Follows redirects within the request's deadline; ``Authorization`` goes along only to
    the same origin (a mirror or object store on another host must not see it)."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is None:
            return None
        new.deadline = _deadline_of(req)  # type: ignore[attr-defined]
        auth = req.unredirected_hdrs.get("Authorization")
        if auth and _origin(req.full_url) == _origin(newurl):
            new.add_unredirected_header("Authorization", auth)
        return new


def opener(context: ssl.SSLContext | None = None) -> urllib.request.OpenerDirector:
    """urllib's opener with the deadline handlers and ``Redirects`` (``context``: TLS)."""
    return urllib.request.build_opener(_HTTPHandler(), _HTTPSHandler(context), Redirects())


_OPENER = opener()


def build_request(
    url: str,
    headers: dict[str, str] | None = None,
    timeout: float | None = None,
    credentials: bool = True,
) -> urllib.request.Request:
    """A GET of ``url`` with a deadline of ``timeout`` (the session's by default) and, with
    ``credentials``, the URL's (pip's sources) as a header (registries bring their own)."""
    problem = _authority_problem(url) or session().refused.get(urllib.parse.urlsplit(url).netloc)
    if problem is not None:
        raise NetError(f"{hide_url_password(url)}: {problem}")
    bare, auth = authorization(url) if credentials else (url, None)
    req = urllib.request.Request(bare, headers={"User-Agent": USER_AGENT, **(headers or {})})
    if auth:
        req.add_unredirected_header("Authorization", auth)
    req.deadline = Deadline(session().timeout if timeout is None else timeout)  # type: ignore[attr-defined]
    return req


def send(
    req: urllib.request.Request, via: urllib.request.OpenerDirector | None = None
) -> http.client.HTTPResponse:
    """The answer to ``req`` (its deadline bounding it); urllib's errors as they are."""
    deadline = _deadline_of(req)
    answer: http.client.HTTPResponse = (via or _OPENER).open(req, timeout=deadline.left())
    return answer


def open_url(url: str, headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    """GET ``url``; raises ``NetError`` (one line, the URL redacted)."""
    try:
        return send(build_request(url, headers))
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
        raise NetError(describe(url, exc)) from None


def check_length(answer: http.client.HTTPResponse, cap: int, url: str) -> None:
    """Refuse an answer whose ``Content-Length`` is over ``cap`` before reading it."""
    length = answer.headers.get("Content-Length") or ""
    if length.strip().isdigit() and int(length) > cap:
        raise NetError(
            f"{hide_url_password(url)}: {int(length):,} bytes announced, over the cap of {cap:,}"
        )


def read_capped(answer: http.client.HTTPResponse, cap: int, url: str) -> bytes:
    """The whole body, at most ``cap`` bytes (``NetError`` past it or past the deadline)."""
    check_length(answer, cap, url)
    encoding = (answer.headers.get("Content-Encoding") or "identity").strip().lower()
    if encoding != "identity":  # never asked for: compressed bytes are not the document
        raise NetError(
            f"{hide_url_password(url)}: answered with Content-Encoding {encoding}, not asked for"
        )
    try:
        data = answer.read(cap + 1)
    except (OSError, http.client.HTTPException) as exc:
        raise NetError(describe(url, exc)) from None
    if len(data) > cap:
        raise NetError(f"{hide_url_password(url)}: more than {cap:,} bytes, over the cap")
    return data


def fetch_bytes(
    url: str, headers: dict[str, str] | None = None, cap: int = MAX_PAGE_BYTES
) -> tuple[bytes, http.client.HTTPResponse]:
    """GET ``url`` whole (capped); the body and the answer (its headers and final URL)."""
    with open_url(url, headers) as answer:
        return read_capped(answer, cap, url), answer


_LOOP = "redirect error that would lead to an infinite loop"


def describe(url: str, exc: BaseException) -> str:
    """One line: the redacted URL and what went wrong."""
    shown = hide_url_password(url)
    if isinstance(exc, NetError):
        return str(exc)
    if isinstance(exc, urllib.error.HTTPError):
        if _LOOP in str(exc.msg):
            why = "redirect loop (followed 10 redirects)"
        else:
            why = f"HTTP {exc.code} {exc.reason}"
    elif isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        why = str(reason) if not isinstance(reason, TimeoutError) else _timeout_text(reason)
    elif isinstance(exc, TimeoutError):
        why = _timeout_text(exc)
    else:
        why = f"{type(exc).__name__}: {exc}"
    return f"{shown}: {hide_url_password(' '.join(why.split()))}"


def _timeout_text(exc: TimeoutError) -> str:
    text = str(exc)
    return text if text.startswith("no complete answer") else f"timed out ({text or 'no answer'})"
