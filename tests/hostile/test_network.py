"""Hostile corpus: what archgap fetches over the network (index pages, wheel URLs, PEP 658
metadata, registries). Each class is a behaviour a server, a redirect or a page can have, played
by a real HTTP server on loopback (``http.server`` in a thread; TLS with a throwaway certificate
where the class needs it), built here by a generator, with its expected outcome.

The rules that decide the outcomes:
* pip sends a URL's ``user:password@`` (percent-decoded) as ``Authorization: Basic``, and reads
  ``~/.netrc`` (``$NETRC``) for a host the URL gives none for; it never prints the password
  (``redact_auth_from_url``: ``user:****@host``), and a redirect to another origin carries no
  ``Authorization``. pip ignores ``file:`` links on a remote page.
* Registry credentials go to a token realm on the registry's own host, or over https with
  ``--trust-token-realm``; never in clear text to another host.
* ``--timeout`` bounds a whole request: a server that sends one byte every 0.2 s (so that a
  per-read timeout never fires) is cut at the deadline, with one line naming the URL once.
* Every body has a byte cap, checked before reading when ``Content-Length`` announces it; a
  partial download is ``NAME.PID-X.part``, removed on failure and SIGTERM, swept once PID is gone.
* The index's sha256 is checked on a whole download; a ranged read says it is unverified.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import http.server
import json
import os
import resource
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from archgap.api import kernels, scan_archives
from archgap.archives.wheel import WheelContents
from archgap.image.registry import RegistryClient, RegistryError
from archgap.image.registry_auth import parse_reference
from archgap.index import net
from archgap.index.fetch import Fetched
from archgap.index.options import IndexOptions
from archgap.index.resolve import ResolveError, project_files
from archgap.report.jsondoc import schema
from archgap.report.kernels import document as kernels_document
from archgap.report.kernels import text as kernels_text
from archgap.targets import mark_unverified, read_targets
from tests.helpers import json_output, run_cli
from tests.loopback_index import make_wheel

FIXTURES = Path(__file__).parent.parent / "fixtures" / "cuda" / "bin"
LIBRARY = FIXTURES / "libmix.so"
SECRET = "s3cr3t-Pa55"
TIMEOUT = 1.0  # the --timeout of the timing classes
TRICKLE = 0.2  # seconds between bytes: below TIMEOUT, so a per-read timeout never fires
TARGET = {"python_version": "3.12", "platform": "manylinux_2_28_x86_64"}
Handler = http.server.BaseHTTPRequestHandler
Route = Callable[[Handler], None]


# -- a loopback server that behaves as each class asks ----------------------------------------


class Server:
    """A threaded HTTP server on 127.0.0.1 whose paths are routes; every request recorded."""

    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        self.routes: dict[str, Route] = {}
        self.seen: list[tuple[str, dict[str, str]]] = []
        self.stop = threading.Event()
        owner = self

        class _Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.seen.append((self.path, dict(self.headers.items())))
                route = owner.routes.get(self.path.split("?")[0])
                try:
                    if route is None:
                        self.send_error(404)
                    else:
                        route(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        if context is not None:
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.scheme = "https" if context else "http"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def url(self, path: str, host: str = "127.0.0.1", userinfo: str = "") -> str:
        at = f"{userinfo}@" if userinfo else ""
        return f"{self.scheme}://{at}{host}:{self.port}{path}"

    def headers_of(self, path: str) -> list[dict[str, str]]:
        return [h for p, h in self.seen if p.split("?")[0] == path]

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def send(status: int, body: bytes, headers: dict[str, str] | None = None) -> Route:
    def route(h: Handler) -> None:
        h.send_response(status)
        for key, value in {"Content-Length": str(len(body)), **(headers or {})}.items():
            h.send_header(key, value)
        h.end_headers()
        h.wfile.write(body)

    return route


def static(body: bytes, kind: str = "text/html", ranges: bool = False) -> Route:
    """A file; with ``ranges``, ``bytes=A-B`` answered with 206 as nginx does."""

    def route(h: Handler) -> None:
        asked = h.headers.get("Range", "")
        if ranges and asked.startswith("bytes="):
            start_text, _, end_text = asked[6:].partition("-")
            start, end = int(start_text), min(int(end_text or len(body) - 1), len(body) - 1)
            part = {"Content-Range": f"bytes {start}-{end}/{len(body)}"}
            return send(206, body[start : end + 1], part)(h)
        return send(200, body, {"Content-Type": kind})(h)

    return route


def needs_basic(user: str, password: str, then: Route) -> Route:
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    def route(h: Handler) -> None:
        if h.headers.get("Authorization") != expected:
            return send(401, b"no", {"WWW-Authenticate": 'Basic realm="index"'})(h)
        return then(h)

    return route


def trickle(stop: threading.Event, head: dict[str, str], seconds: float = 8.0) -> Route:
    """Headers, then one byte every TRICKLE seconds, for at most ``seconds``."""

    def route(h: Handler) -> None:
        h.send_response(200)
        for key, value in head.items():
            h.send_header(key, value)
        h.end_headers()
        end = time.monotonic() + seconds
        while time.monotonic() < end and not stop.is_set():
            h.wfile.write(b"<")
            h.wfile.flush()
            time.sleep(TRICKLE)

    return route


def stall(stop: threading.Event, before_headers: bytes = b"") -> Route:
    """Sends ``before_headers`` a byte at a time (or nothing), never a whole answer."""

    def route(h: Handler) -> None:
        for byte in before_headers:
            if stop.is_set():
                return
            h.wfile.write(bytes([byte]))
            h.wfile.flush()
            time.sleep(TRICKLE)
        stop.wait(8.0)

    return route


def endless(stop: threading.Event, chunk: bytes = b"\0" * (1 << 16)) -> Route:
    def route(h: Handler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "application/octet-stream")
        h.end_headers()
        while not stop.is_set():
            h.wfile.write(chunk)

    return route


def redirect(location: str) -> Route:
    return send(302, b"", {"Location": location})


# -- what the classes share -------------------------------------------------------------------


def wheel_bytes(tmp: Path, tag: str = "py3-none-manylinux_2_17_x86_64", **kw: Any) -> Path:
    return make_wheel(tmp, "demo-pkg", "1.0", {"demo_pkg/libmix.so": LIBRARY}, tag=tag, **kw)


def page(files: list[tuple[str, str | None]]) -> bytes:
    """A PEP 503 project page: (href, sha256 or None) per file."""
    links = [f'<a href="{href}{f"#sha256={d}" if d else ""}">{href.rsplit("/", 1)[-1]}</a>'
             for href, d in files]  # fmt: skip
    return ("<!DOCTYPE html><html><body>" + "\n".join(links) + "</body></html>").encode()


@dataclass
class Lab:
    tmp: Path
    servers: list[Server] = field(default_factory=list)
    wheel: Path | None = None

    def server(self, context: ssl.SSLContext | None = None) -> Server:
        found = Server(context)
        self.servers.append(found)
        return found

    def demo_wheel(self) -> tuple[Path, bytes, str]:
        if self.wheel is None:
            self.wheel = wheel_bytes(self.tmp)
        data = self.wheel.read_bytes()
        return self.wheel, data, hashlib.sha256(data).hexdigest()

    def index(self, server: Server, ranges: bool = False, digest: str | None = "") -> str:
        """demo-pkg on ``server``'s /simple/ (the wheel under /files/); its index URL."""
        wheel, data, sha = self.demo_wheel()
        server.routes["/files/" + wheel.name] = static(data, "application/octet-stream", ranges)
        listed = sha if digest == "" else digest
        server.routes["/simple/demo-pkg/"] = static(page([("../../files/" + wheel.name, listed)]))
        return server.url("/simple/")


def read(targets: list[str], **options: Any) -> tuple[list[WheelContents], list[Fetched]]:
    contents, fetched = read_targets(targets, IndexOptions(**{**TARGET, **options}))
    mark_unverified(contents, fetched)  # what scan reports
    return contents, fetched


def targeted(index_url: str | None = None) -> IndexOptions:
    """The options ``read`` uses, for the api's commands."""
    return IndexOptions(index_url, python_version="3.12", platform="manylinux_2_28_x86_64")


def reasons(contents: list[WheelContents]) -> list[str]:
    return [p.reason for c in contents for p in c.problems]


def everything(contents: list[WheelContents], fetched: list[Fetched], cache: Path) -> str:
    """All a run could show or keep: labels, problems, how it fetched, the cache's names."""
    shown = [c.label for c in contents] + [f"{p.subject} {p.reason}" for c in contents
                                           for p in c.problems]  # fmt: skip
    shown += [repr(f) for f in fetched]
    shown += [str(p) for p in cache.rglob("*")] if cache.exists() else []
    return "\n".join(shown)


def one_line_once(contents: list[WheelContents], url: str) -> str:
    """The one problem, one line, the URL in it once (as its subject, or in the reason)."""
    [problem] = [p for c in contents for p in c.problems]
    line = f"{problem.subject}: {problem.reason}"
    assert "\n" not in line and line.count(url) == 1, line
    return problem.reason


def cache(lab: Lab) -> Path:
    return lab.tmp / "cache" / "archgap"


# -- credentials ------------------------------------------------------------------------------


def _authorized_index(lab: Lab, user: str = "alice") -> tuple[Server, str]:
    server = lab.server()
    lab.index(server)
    for path, route in list(server.routes.items()):
        server.routes[path] = needs_basic(user, SECRET, route)
    return server, server.url("/simple/")


def userinfo_index_url(lab: Lab) -> None:
    """Credentials in the index URL go, as pip sends them, to the index's origin only: the page
    and a wheel on that host get them; a wheel the page links on another origin (localhost is
    not 127.0.0.1) does not. With the wrong user the index answers 401, and that failure names
    the URL with the password hidden."""
    server, index = _authorized_index(lab)
    url = index.replace("://", f"://alice:{SECRET}@")
    contents, fetched = read(["demo-pkg"], index_url=url)
    assert contents[0].distributions and not reasons(contents), reasons(contents)
    wheel, data, sha = lab.demo_wheel()
    asked = server.headers_of("/simple/demo-pkg/") + server.headers_of("/files/" + wheel.name)
    assert asked and all(h.get("Authorization") for h in asked)
    assert SECRET not in everything(contents, fetched, cache(lab))

    elsewhere = lab.server()
    elsewhere.routes["/w/" + wheel.name] = static(data)
    linked = page([(elsewhere.url("/w/" + wheel.name, host="localhost"), sha)])
    server.routes["/simple/demo-pkg/"] = needs_basic("alice", SECRET, static(linked))
    contents, fetched = read(["demo-pkg"], index_url=url)
    assert contents[0].distributions and not reasons(contents), reasons(contents)
    taken = elsewhere.headers_of("/w/" + wheel.name)
    assert taken and not any("Authorization" in h for h in taken)

    refused, fetched = read(["demo-pkg"], index_url=index.replace("://", f"://bob:{SECRET}@"))
    [reason] = reasons(refused)
    assert "HTTP 401" in reason and "bob:****@" in reason, reason
    assert SECRET not in everything(refused, fetched, cache(lab))


def userinfo_pip_index_url(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    _, index = _authorized_index(lab)
    monkeypatch.setenv("PIP_INDEX_URL", index.replace("://", f"://alice:{SECRET}@"))
    contents, fetched = read(["demo-pkg"])
    assert contents[0].distributions and not reasons(contents), reasons(contents)
    assert SECRET not in everything(contents, fetched, cache(lab))


def userinfo_extra_index_url(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    _, index = _authorized_index(lab)
    empty = lab.server()
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", index.replace("://", f"://alice:{SECRET}@"))
    contents, fetched = read(["demo-pkg"], index_url=empty.url("/simple/"))
    assert contents[0].distributions, reasons(contents)
    assert SECRET not in everything(contents, fetched, cache(lab))


def userinfo_wheel_url(lab: Lab) -> None:
    server = lab.server()
    wheel, data, _ = lab.demo_wheel()
    server.routes["/w/" + wheel.name] = needs_basic("alice", SECRET, static(data))
    contents, fetched = read([server.url("/w/" + wheel.name, userinfo=f"alice:{SECRET}")])
    assert contents[0].distributions, reasons(contents)
    assert contents[0].label == server.url("/w/" + wheel.name, userinfo="alice:****")
    assert SECRET not in everything(contents, fetched, cache(lab))


def userinfo_percent_encoded(lab: Lab) -> None:
    """pip unquotes the userinfo: ``al%40corp:p%3Ass`` is user al@corp, password p:ss."""
    server = lab.server()
    wheel, data, _ = lab.demo_wheel()
    server.routes["/w/" + wheel.name] = needs_basic("al@corp", "p:ss/" + SECRET, static(data))
    encoded = "al%40corp:p%3Ass%2F" + SECRET
    contents, fetched = read([server.url("/w/" + wheel.name, userinfo=encoded)])
    assert contents[0].distributions, reasons(contents)
    assert contents[0].label == server.url("/w/" + wheel.name, userinfo="al%40corp:****")
    assert SECRET not in everything(contents, fetched, cache(lab))


def userinfo_token_only(lab: Lab) -> None:
    """A lone user is a token (pip): ``TOKEN@host`` is sent as TOKEN with no password and
    shown as ``****@host``."""
    server = lab.server()
    wheel, data, _ = lab.demo_wheel()
    server.routes["/w/" + wheel.name] = needs_basic(SECRET, "", static(data))
    contents, fetched = read([server.url("/w/" + wheel.name, userinfo=SECRET)])
    assert contents[0].distributions, reasons(contents)
    assert contents[0].label == server.url("/w/" + wheel.name, userinfo="****")
    assert SECRET not in everything(contents, fetched, cache(lab))


# RFC 3986 section 3.2: the authority ends at the first '/', '?' or '#', and userinfo cannot hold
# them unencoded; so ``alice:Zq/SECRET@host`` has the authority ``alice:Zq`` (host alice, port
# Zq), as pip and urllib read it, and fails on its port. Archgap refuses it with that reason,
# requests nothing, and shows none of the password (neither ``Zq`` nor what follows the '/').
SLASHED = "Zq/" + SECRET


def unencoded_slash_wheel_url(lab: Lab) -> None:
    server = lab.server()
    wheel, data, _ = lab.demo_wheel()
    server.routes["/w/" + wheel.name] = needs_basic("alice", SLASHED, static(data))
    contents, fetched = read([server.url("/w/" + wheel.name, userinfo=f"alice:{SLASHED}")])
    [reason] = reasons(contents)
    assert "not [user[:password]@]host[:port]" in reason and "%2F" in reason, reason
    assert not server.seen  # nothing was sent anywhere
    shown = everything(contents, fetched, cache(lab))
    assert SECRET not in shown and "Zq" not in shown, shown


def unencoded_slash_index_url_cli(lab: Lab) -> None:
    """The same password in --index-url, through the CLI, text at -vv and JSON."""
    server, index = _authorized_index(lab)
    url = index.replace("://", f"://alice:{SLASHED}@")
    env = {"XDG_CACHE_HOME": str(lab.tmp / "cache"), "HOME": str(lab.tmp)}
    for extra in (("-vv",), ("--json",)):
        result = run_cli("scan", "demo-pkg", "--index-url", url, "--python-version", "3.12",
                         "--platform", "manylinux_2_28_x86_64", *extra, env=env)  # fmt: skip
        output = result.stdout + result.stderr
        assert result.returncode == 2 and "%2F" in output, output
        assert SECRET not in output and "Zq" not in output, output
    assert not server.seen


def netrc_credentials(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    _, index = _authorized_index(lab)
    netrc = lab.tmp / "netrc"
    netrc.write_text(f"machine 127.0.0.1 login alice password {SECRET}\n")
    monkeypatch.setenv("NETRC", str(netrc))
    contents, fetched = read(["demo-pkg"], index_url=index)
    assert contents[0].distributions and not reasons(contents), reasons(contents)
    assert SECRET not in everything(contents, fetched, cache(lab))


def wrong_password_is_redacted(lab: Lab) -> None:
    _, index = _authorized_index(lab)
    url = index.replace("://", "://alice:wrong-" + SECRET + "@")
    contents, _ = read(["demo-pkg"], index_url=url)
    [reason] = reasons(contents)
    assert "HTTP 401" in reason and "alice:****@" in reason and SECRET not in reason, reason


def wrong_password_cli_every_verbosity(lab: Lab) -> None:
    """Text at -vv and JSON: the password is in neither stream."""
    _, index = _authorized_index(lab)
    url = index.replace("://", "://alice:wrong-" + SECRET + "@")
    env = {"XDG_CACHE_HOME": str(lab.tmp / "cache"), "HOME": str(lab.tmp)}
    for extra in (("-vv",), ("--json",)):
        result = run_cli("scan", "demo-pkg", "--index-url", url, "--python-version", "3.12",
                         "--platform", "manylinux_2_28_x86_64", *extra, env=env)  # fmt: skip
        assert result.returncode == 2, result.stderr
        assert "alice:****@" in result.stdout + result.stderr
        assert SECRET not in result.stdout + result.stderr


def redirect_to_other_host_drops_auth(lab: Lab) -> None:
    """The index redirects the wheel to a mirror on another host (localhost is not 127.0.0.1
    as an origin): the mirror must not see the index's credentials."""
    index_server, index = _authorized_index(lab)
    mirror = lab.server()
    wheel, data, _ = lab.demo_wheel()
    mirror.routes["/m/" + wheel.name] = static(data)
    index_server.routes["/files/" + wheel.name] = redirect(
        mirror.url("/m/" + wheel.name, host="localhost")
    )
    contents, _ = read(["demo-pkg"], index_url=index.replace("://", f"://alice:{SECRET}@"))
    assert contents[0].distributions, reasons(contents)
    asked = mirror.headers_of("/m/" + wheel.name)
    assert asked and not any("Authorization" in headers for headers in asked)


def redirect_same_origin_keeps_auth(lab: Lab) -> None:
    server, index = _authorized_index(lab)
    wheel, data, _ = lab.demo_wheel()
    server.routes["/moved/" + wheel.name] = needs_basic("alice", SECRET, static(data))
    server.routes["/files/" + wheel.name] = redirect("/moved/" + wheel.name)
    contents, _ = read(["demo-pkg"], index_url=index.replace("://", f"://alice:{SECRET}@"))
    assert contents[0].distributions and not reasons(contents), reasons(contents)


def cache_name_has_no_secret(lab: Lab) -> None:
    server = lab.server()
    wheel, data, _ = lab.demo_wheel()
    server.routes["/w/" + wheel.name] = static(data)
    read([server.url("/w/" + wheel.name, userinfo=f"alice:{SECRET}")])
    names = [p.name for p in cache(lab).rglob("*")]
    assert any(n.endswith(wheel.name) for n in names)
    assert not any(SECRET in n for n in names)
    assert not any(SECRET.encode() in p.read_bytes() for p in cache(lab).rglob("*") if p.is_file())


# -- registries -------------------------------------------------------------------------------


def _registry(
    lab: Lab, realm_host: str, token_context: ssl.SSLContext | None = None
) -> tuple[RegistryClient, Server]:
    """A registry on 127.0.0.1 whose token realm is on ``realm_host``; the user's credentials
    for the registry in REGISTRY_AUTH_FILE. The client, the token server."""
    token_server = lab.server(token_context)
    token_server.routes["/token"] = send(200, json.dumps({"token": "tok"}).encode())
    registry = lab.server()
    realm = token_server.url("/token", host=realm_host)
    challenge = f'Bearer realm="{realm}",service="test",scope="repository:team/app:pull"'

    def manifest(h: Handler) -> None:
        if h.headers.get("Authorization") != "Bearer tok":
            return send(401, b"{}", {"WWW-Authenticate": challenge})(h)
        kind = "application/vnd.oci.image.manifest.v1+json"
        return send(200, b'{"schemaVersion": 2}', {"Content-Type": kind})(h)

    registry.routes["/v2/team/app/manifests/v1"] = manifest
    auth = lab.tmp / "auth.json"
    basic = base64.b64encode(f"alice:{SECRET}".encode()).decode()
    auth.write_text(json.dumps({"auths": {f"127.0.0.1:{registry.port}": {"auth": basic}}}))
    env = {"REGISTRY_AUTH_FILE": str(auth), "HOME": str(lab.tmp)}
    ref = parse_reference(f"docker://127.0.0.1:{registry.port}/team/app:v1")
    return RegistryClient(ref, env=env, timeout=2.0), token_server


def _token_auth(token_server: Server) -> list[str | None]:
    return [h.get("Authorization") for h in token_server.headers_of("/token")]


def realm_on_other_host_http(lab: Lab) -> None:
    client, tokens = _registry(lab, "localhost")
    client.manifest_bytes()
    assert _token_auth(tokens) == [None]


def realm_on_same_host(lab: Lab) -> None:
    """The token server on the registry's own host (another port): it gets the credentials."""
    client, tokens = _registry(lab, "127.0.0.1")
    client.manifest_bytes()
    [auth] = _token_auth(tokens)
    assert auth == "Basic " + base64.b64encode(f"alice:{SECRET}".encode()).decode()


def _tls(lab: Lab) -> ssl.SSLContext:
    key, cert = lab.tmp / "key.pem", lab.tmp / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
         "-days", "1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


def realm_https_other_host_needs_opt_in(lab: Lab) -> None:
    client, tokens = _registry(lab, "localhost", _tls(lab))
    client.manifest_bytes()
    assert _token_auth(tokens) == [None]


def realm_https_other_host_opted_in(lab: Lab) -> None:
    client, tokens = _registry(lab, "localhost", _tls(lab))
    with net.limits(trust_token_realm=True):
        client.manifest_bytes()
    assert _token_auth(tokens)[0] is not None


def realm_http_other_host_even_opted_in(lab: Lab) -> None:
    """The opt-in is for https only: clear text to another host never has them."""
    client, tokens = _registry(lab, "localhost")
    with net.limits(trust_token_realm=True):
        client.manifest_bytes()
    assert _token_auth(tokens) == [None]


def realm_withheld_refusal_says_why(lab: Lab) -> None:
    client, tokens = _registry(lab, "localhost")
    tokens.routes["/token"] = send(401, b"{}")
    with pytest.raises(RegistryError) as caught:
        client.manifest_bytes()
    message = str(caught.value)
    assert "not sent in clear text to the token realm" in message and SECRET not in message


# -- one deadline -----------------------------------------------------------------------------


def trickle_index_page(lab: Lab) -> None:
    server = lab.server()
    server.routes["/simple/demo-pkg/"] = trickle(server.stop, {"Content-Type": "text/html"})
    contents, _ = read(["demo-pkg"], index_url=server.url("/simple/"), timeout=TIMEOUT)
    reason = one_line_once(contents, server.url("/simple/demo-pkg/"))
    assert f"within {TIMEOUT:g} s" in reason


def trickle_wheel_body(lab: Lab) -> None:
    server = lab.server()
    server.routes["/w/x.whl"] = trickle(server.stop, {"Content-Length": "100000"})
    contents, _ = read([server.url("/w/x.whl")], timeout=TIMEOUT)
    assert f"within {TIMEOUT:g} s" in one_line_once(contents, server.url("/w/x.whl"))
    assert not list(cache(lab).rglob("*.part"))


def stalled_headers(lab: Lab) -> None:
    server = lab.server()
    server.routes["/w/x.whl"] = stall(server.stop)
    contents, _ = read([server.url("/w/x.whl")], timeout=TIMEOUT)
    assert f"within {TIMEOUT:g} s" in one_line_once(contents, server.url("/w/x.whl"))


def trickle_headers(lab: Lab) -> None:
    server = lab.server()
    server.routes["/w/x.whl"] = stall(server.stop, b"HTTP/1.0 200 OK\r\nX-Slow: " + b"a" * 200)
    contents, _ = read([server.url("/w/x.whl")], timeout=TIMEOUT)
    assert f"within {TIMEOUT:g} s" in one_line_once(contents, server.url("/w/x.whl"))


def trickle_metadata(lab: Lab) -> None:
    """A PEP 658 metadata file that trickles (--deps reads it): cut at the deadline too."""
    server = lab.server()
    wheel, data, sha = lab.demo_wheel()
    server.routes["/files/" + wheel.name] = static(data)
    listing = f'<a href="../../files/{wheel.name}#sha256={sha}" data-core-metadata="true">x</a>'
    server.routes["/simple/demo-pkg/"] = static(listing.encode())
    server.routes[f"/files/{wheel.name}.metadata"] = trickle(server.stop, {})
    contents, _ = read(["demo-pkg"], index_url=server.url("/simple/"), deps=True, timeout=TIMEOUT)
    assert any("metadata" in r and f"within {TIMEOUT:g} s" in r for r in reasons(contents))


def trickle_registry_blob(lab: Lab) -> None:
    """A layer of 100 bytes sent a byte at a time: its deadline is the timeout plus a second
    per MiB, so it is cut at about the timeout (2 s here)."""
    client, _ = _registry(lab, "127.0.0.1")
    registry = lab.servers[-1]
    digest = "sha256:" + "ab" * 32
    registry.routes[f"/v2/team/app/blobs/{digest}"] = trickle(registry.stop, {})
    with pytest.raises(OSError, match="within 2 s"), client.open_blob(digest, 100) as stream:
        stream.read()


# -- caps -------------------------------------------------------------------------------------


def endless_wheel_body(lab: Lab) -> None:
    server = lab.server()
    server.routes["/w/x.whl"] = endless(server.stop)
    contents, _ = read([server.url("/w/x.whl")], max_download=4 << 20)
    [reason] = reasons(contents)
    assert f"more than {4 << 20:,} bytes, over the cap" in reason, reason
    assert not list(cache(lab).rglob("*.part"))


def huge_content_length(lab: Lab) -> None:
    server = lab.server()
    server.routes["/w/x.whl"] = send(200, b"", {"Content-Length": str(10**15)})
    contents, _ = read([server.url("/w/x.whl")])
    [reason] = reasons(contents)
    assert f"{10**15:,} bytes announced, over the cap" in reason, reason


def huge_content_length_page(lab: Lab) -> None:
    server = lab.server()
    server.routes["/simple/demo-pkg/"] = send(200, b"", {"Content-Length": str(80 << 20)})
    with pytest.raises(ResolveError, match="announced, over the cap"):
        project_files(server.url("/simple/"), "demo-pkg")


def page_of_80_mb(lab: Lab) -> None:
    """80 MB of links without a Content-Length: refused at 32 MiB, memory stays low."""
    server = lab.server()
    line = b'<a href="../../files/demo_pkg-1.0-py3-none-any.whl">x</a>\n'
    server.routes["/simple/demo-pkg/"] = endless(server.stop, line * 1000)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ResolveError, match="over the cap"):
        project_files(server.url("/simple/"), "demo-pkg")
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before  # KiB
    assert grown < 200 << 10, f"{grown} KiB"


def gzip_bomb_page(lab: Lab) -> None:
    """A page sent gzip-encoded, never asked for: refused as what it is, never inflated."""
    server = lab.server()
    bomb = gzip.compress(b" " * (64 << 20))
    headers = {"Content-Encoding": "gzip", "Content-Type": "application/vnd.pypi.simple.v1+json"}
    server.routes["/simple/demo-pkg/"] = send(200, bomb, headers)
    with pytest.raises(ResolveError, match="Content-Encoding gzip, not asked for"):
        project_files(server.url("/simple/"), "demo-pkg")


def invalid_json_page(lab: Lab) -> None:
    server = lab.server()
    kind = {"Content-Type": "application/vnd.pypi.simple.v1+json"}
    server.routes["/simple/demo-pkg/"] = send(200, b'{"files": [\n{"filename": ', kind)
    with pytest.raises(ResolveError) as caught:
        project_files(server.url("/simple/"), "demo-pkg")
    assert "not a PEP 691 project page" in str(caught.value) and "\n" not in str(caught.value)


def json_page_of_tiny_values(lab: Lab) -> None:
    """Under the byte cap, but millions of values (each a Python object when parsed)."""
    server = lab.server()
    body = b'{"files": [' + b"{}," * 5_000_000 + b"{}]}"
    kind = {"Content-Type": "application/vnd.pypi.simple.v1+json"}
    server.routes["/simple/demo-pkg/"] = send(200, body, kind)
    with pytest.raises(ResolveError, match="JSON values on the page: over the cap"):
        project_files(server.url("/simple/"), "demo-pkg")


def html_page_of_many_links(lab: Lab) -> None:
    server = lab.server()
    server.routes["/simple/demo-pkg/"] = send(200, b"<a href=x>" * 300_000)
    with pytest.raises(ResolveError, match="links on the page: over the cap"):
        project_files(server.url("/simple/"), "demo-pkg")


def token_answer_endless(lab: Lab) -> None:
    client, tokens = _registry(lab, "127.0.0.1")
    tokens.routes["/token"] = endless(tokens.stop, b"[" * 65536)
    with pytest.raises(RegistryError, match="over the cap"):
        client.manifest_bytes()


# -- ranges -----------------------------------------------------------------------------------


def short_206_answers(lab: Lab) -> None:
    """Every range answered with one byte: not a request per byte, a whole download instead."""
    server = lab.server()
    wheel, data, _ = lab.demo_wheel()

    def one_byte(h: Handler) -> None:
        if h.headers.get("Range"):
            start = int(h.headers["Range"][6:].partition("-")[0])
            rng = {"Content-Range": f"bytes {start}-{start}/{len(data)}"}
            return send(206, data[start : start + 1], rng)(h)
        return send(200, data)(h)

    server.routes["/w/" + wheel.name] = one_byte
    contents, _ = read([server.url("/w/" + wheel.name)])
    assert contents[0].distributions, reasons(contents)
    assert len(server.seen) <= 4, len(server.seen)


def range_at_another_offset(lab: Lab) -> None:
    """206 with the bytes of another range (Content-Range says so): not taken as the asked."""
    server = lab.server()
    wheel, data, _ = lab.demo_wheel()

    def from_zero(h: Handler) -> None:
        if h.headers.get("Range"):
            rng = {"Content-Range": f"bytes 0-{len(data) - 1}/{len(data)}"}
            return send(206, data, rng)(h)
        return send(200, data)(h)

    server.routes["/w/" + wheel.name] = from_zero
    contents, _ = read([server.url("/w/" + wheel.name)])
    assert contents[0].distributions, reasons(contents)


def wrong_sha256_full_download(lab: Lab) -> None:
    server = lab.server()
    index = lab.index(server, digest="0" * 64)
    contents, _ = read(["demo-pkg"], index_url=index)
    [reason] = reasons(contents)
    assert "is not the index's " + "0" * 64 in reason
    assert not [p for p in cache(lab).rglob("*") if p.is_file()]


def wrong_sha256_ranged(lab: Lab) -> None:
    """A wheel read through range requests cannot be checked against the index's sha256 (here a
    wrong one): the report scan gives says so. Asked of the api, not of the readers, so the
    product's own marking is what is tested (the readers alone mark nothing)."""
    server = lab.server()
    index = lab.index(server, ranges=True, digest="0" * 64)
    contents, _ = read_targets(["demo-pkg"], targeted(index))
    assert contents[0].distributions and not reasons(contents)  # nothing marked by the readers
    report = scan_archives(["demo-pkg"], gpus=["H100"], options=targeted(index))
    marked = [p for p in report.problems if p.reason.startswith("unverified:")]
    assert [p.subject.endswith(".whl") for p in marked] == [True], report.problems


def right_sha256_full_download(lab: Lab) -> None:
    server = lab.server()
    contents, fetched = read(["demo-pkg"], index_url=lab.index(server))
    assert contents[0].distributions and not reasons(contents)
    assert [f.verified for f in fetched] == [True]


def redirect_loop(lab: Lab) -> None:
    server = lab.server()
    server.routes["/w/a.whl"] = redirect("/w/b.whl")
    server.routes["/w/b.whl"] = redirect("/w/a.whl")
    contents, _ = read([server.url("/w/a.whl")])
    assert "redirect loop" in one_line_once(contents, server.url("/w/a.whl"))


def server_error_one_line(lab: Lab) -> None:
    server = lab.server()
    server.routes["/w/x.whl"] = send(500, b"line one\nline two\n")
    contents, _ = read([server.url("/w/x.whl")])
    assert "HTTP 500" in one_line_once(contents, server.url("/w/x.whl"))


def truncated_body(lab: Lab) -> None:
    """Content-Length promises more than comes before the connection closes."""
    server = lab.server()

    def short(h: Handler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", "100000")
        h.end_headers()
        h.wfile.write(b"PK\3\4" + b"\0" * 100)

    server.routes["/w/x.whl"] = short
    contents, _ = read([server.url("/w/x.whl")])
    [reason] = reasons(contents)
    assert "the connection closed 99,896 bytes before the end" in reason
    assert not list(cache(lab).rglob("*.part"))


# -- links and local files --------------------------------------------------------------------


def file_link_on_remote_page(lab: Lab) -> None:
    """A FIFO behind a file: link: pip ignores the link, so the FIFO is never opened."""
    fifo = lab.tmp / "demo_pkg-1.0-py3-none-manylinux_2_17_x86_64.whl"
    os.mkfifo(fifo)
    server = lab.server()
    server.routes["/simple/demo-pkg/"] = static(page([(fifo.as_uri(), None)]))
    contents = read(["demo-pkg"], index_url=server.url("/simple/"))[0]
    assert "0 files listed" in reasons(contents)[0], reasons(contents)


def data_link_on_remote_page(lab: Lab) -> None:
    server = lab.server()
    href = (
        "data:application/zip;base64,UEsFBgAAAAAAAAAAAAAAAAAAAAAAAA==#demo_pkg-1.0-py3-none-any.whl"
    )
    server.routes["/simple/demo-pkg/"] = static(page([(href, None)]))
    assert project_files(server.url("/simple/"), "demo-pkg") == []


def fifo_wheel_path(lab: Lab) -> None:
    fifo = lab.tmp / "x-1.0-py3-none-any.whl"
    os.mkfifo(fifo)
    contents = read([str(fifo)])[0]
    assert reasons(contents) == ["a FIFO, not a regular file"]


def fifo_file_url(lab: Lab) -> None:
    fifo = lab.tmp / "x-1.0-py3-none-any.whl"
    os.mkfifo(fifo)
    contents, _ = read([fifo.as_uri()])
    assert reasons(contents) == ["a FIFO, not a regular file"]


def directory_file_url(lab: Lab) -> None:
    directory = lab.tmp / "x-1.0-py3-none-any.whl"
    directory.mkdir()
    contents, _ = read([directory.as_uri()])
    assert reasons(contents) == ["a directory, not a regular file"]


def name_and_wheel_tag_disagree(lab: Lab) -> None:
    """Named for x86_64, its WHEEL says aarch64, its library is x86-64: a problem of the wheel,
    but pip installs it by the name, on x86-64, where the library loads: the gate holds."""
    built = wheel_bytes(lab.tmp, tag="py3-none-manylinux_2_17_aarch64")
    named = lab.tmp / built.name.replace("aarch64", "x86_64")
    built.rename(named)
    [reason] = reasons(read([str(named)])[0])
    assert reason.startswith("the file name says x86-64 but its WHEEL file's Tag says aarch64")
    assert not scan_archives([str(named)], gpus=["H100"], options=targeted()).has_gap


def _arm_library_wheel(lab: Lab) -> Path:
    """Named and tagged x86_64, its one library an aarch64 ELF (e_machine 183 at offset 18)
    holding sm_90 SASS, which runs on an H100."""
    library = bytearray(LIBRARY.read_bytes())
    library[18:20] = (183).to_bytes(2, "little")
    arm = lab.tmp / "libmix.so"
    arm.write_bytes(bytes(library))
    return make_wheel(lab.tmp, "demo-pkg", "1.0", {"demo_pkg/libmix.so": arm})


def name_and_elf_disagree_fails_the_gates(lab: Lab) -> None:
    """pip installs the wheel on x86-64 machines, where its aarch64 library cannot load, so it
    runs on no GPU whatever SASS it holds: ``scan --require`` and ``kernels --require`` exit 1,
    saying so (scan as a host-platform finding for any GPU, kernels as the library's failure)."""
    wheel = str(_arm_library_wheel(lab))
    why = "1 native file is aarch64 but the file name of " + wheel + " says x86-64"
    report = scan_archives([wheel], gpus=["H100"], options=targeted())
    [finding] = report.platform_gaps
    cpus = (finding.environment_cpu, finding.host_cpu)
    assert finding.gpu == "any GPU" and cpus == ("aarch64", "x86-64")
    assert finding.cause.startswith(why) and report.has_gap
    assert [p.verdict for p in report.packages] == ["native"]  # the SASS alone would run
    gate = kernels([wheel], require=["H100"]).gate
    assert gate is not None and [f.reason.startswith(why) for f in gate.failures] == [True]
    env = {"XDG_CACHE_HOME": str(lab.tmp / "cache"), "HOME": str(lab.tmp)}
    scanned = run_cli("scan", wheel, "--require", "H100", env=env)
    assert scanned.returncode == 1 and why in scanned.stdout, scanned.stdout + scanned.stderr
    listed = run_cli("kernels", wheel, "--require", "H100", "--json", env=env)
    assert listed.returncode == 1 and not json_output(listed, "kernels")["require"]["passed"]


def all_three_agree(lab: Lab) -> None:
    wheel, _, _ = lab.demo_wheel()
    contents, _ = read([str(wheel)])
    assert contents[0].binaries and not reasons(contents)
    report = scan_archives([str(wheel)], gpus=["H100"], options=targeted())
    assert not report.has_gap and not report.platform
    gate = kernels([str(wheel)], require=["H100"]).gate
    assert gate is not None and gate.passed


def kernels_marks_ranged_reads_unverified(lab: Lab) -> None:
    """kernels reads through ranges as scan does, and says so: the index's sha256 unchecked,
    in text and JSON (not an unreadable file: the exit code stays the gate's)."""
    index = lab.index(lab.server(), ranges=True)
    result = kernels(["demo-pkg"], require=["H100"], options=targeted(index))
    [label] = result.unverified
    assert label.endswith(".whl") and not result.unreadable
    assert result.gate is not None and result.gate.passed
    assert any(
        label in line and "unverified" in line for line in kernels_text(result, False, False)
    )
    doc = kernels_document(result)
    jsonschema.validate(doc, schema("kernels"))
    assert doc["unverified"] == [label]


# -- partial files ----------------------------------------------------------------------------


def sigterm_removes_partial(lab: Lab) -> None:
    """SIGTERM (what timeout, systemd and Kubernetes send) during a download: the partial
    file goes, and the process ends by the signal (status 143 in a shell)."""
    server = lab.server()
    server.routes["/w/x.whl"] = trickle(server.stop, {"Content-Length": "100000"}, 20)
    env = {**os.environ, "XDG_CACHE_HOME": str(lab.tmp / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "archgap", "scan", server.url("/w/x.whl"),
                             "--timeout", "30"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    wheels = cache(lab) / "wheels"
    deadline = time.monotonic() + 15
    while not list(wheels.glob("*.part")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(wheels.glob("*.part")), "no download started"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == -signal.SIGTERM  # a hang guard
    assert not list(wheels.glob("*.part"))


def stale_partials_swept(lab: Lab) -> None:
    """A partial of a process that is gone is removed by the next download; one of a live
    process (this one's parent) stays."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    wheels = cache(lab) / "wheels"
    wheels.mkdir(parents=True)
    dead = wheels / f"abc-x.whl.{gone.pid}-k2j4.part"
    live = wheels / f"abc-y.whl.{os.getppid()}-k2j4.part"
    dead.write_bytes(b"left by a kill -9")
    live.write_bytes(b"still downloading")
    server = lab.server()
    wheel, data, _ = lab.demo_wheel()
    server.routes["/w/" + wheel.name] = static(data)
    read([server.url("/w/" + wheel.name)])
    assert not dead.exists() and live.exists()


CLASSES = [
    pytest.param(userinfo_index_url, id="userinfo-index-url"),
    pytest.param(userinfo_pip_index_url, id="userinfo-PIP_INDEX_URL"),
    pytest.param(userinfo_extra_index_url, id="userinfo-PIP_EXTRA_INDEX_URL"),
    pytest.param(userinfo_wheel_url, id="userinfo-wheel-url"),
    pytest.param(userinfo_percent_encoded, id="userinfo-percent-encoded"),
    pytest.param(userinfo_token_only, id="userinfo-token-only"),
    pytest.param(unencoded_slash_wheel_url, id="userinfo-unencoded-slash-wheel-url"),
    pytest.param(unencoded_slash_index_url_cli, id="userinfo-unencoded-slash-index-url-cli"),
    pytest.param(netrc_credentials, id="netrc"),
    pytest.param(wrong_password_is_redacted, id="wrong-password-redacted"),
    pytest.param(wrong_password_cli_every_verbosity, id="wrong-password-cli-vv-json"),
    pytest.param(redirect_to_other_host_drops_auth, id="redirect-other-host-drops-auth"),
    pytest.param(redirect_same_origin_keeps_auth, id="redirect-same-origin-keeps-auth"),
    pytest.param(cache_name_has_no_secret, id="cache-name-no-secret"),
    pytest.param(realm_on_other_host_http, id="realm-other-host-http"),
    pytest.param(realm_on_same_host, id="realm-same-host"),
    pytest.param(realm_https_other_host_needs_opt_in, id="realm-https-other-host"),
    pytest.param(realm_https_other_host_opted_in, id="realm-https-other-host-opted-in"),
    pytest.param(realm_http_other_host_even_opted_in, id="realm-http-other-host-opted-in"),
    pytest.param(realm_withheld_refusal_says_why, id="realm-withheld-refusal"),
    pytest.param(trickle_index_page, id="trickle-index-page"),
    pytest.param(trickle_wheel_body, id="trickle-wheel-body"),
    pytest.param(stalled_headers, id="stalled-headers"),
    pytest.param(trickle_headers, id="trickle-headers"),
    pytest.param(trickle_metadata, id="trickle-metadata"),
    pytest.param(trickle_registry_blob, id="trickle-registry-blob"),
    pytest.param(endless_wheel_body, id="endless-body"),
    pytest.param(huge_content_length, id="huge-content-length"),
    pytest.param(huge_content_length_page, id="huge-content-length-page"),
    pytest.param(page_of_80_mb, id="page-80-mb"),
    pytest.param(gzip_bomb_page, id="gzip-bomb-page"),
    pytest.param(invalid_json_page, id="invalid-json-page"),
    pytest.param(json_page_of_tiny_values, id="json-page-tiny-values"),
    pytest.param(html_page_of_many_links, id="html-page-many-links"),
    pytest.param(token_answer_endless, id="token-answer-endless"),
    pytest.param(short_206_answers, id="short-206"),
    pytest.param(range_at_another_offset, id="range-another-offset"),
    pytest.param(wrong_sha256_full_download, id="wrong-sha256-full"),
    pytest.param(wrong_sha256_ranged, id="wrong-sha256-ranged"),
    pytest.param(right_sha256_full_download, id="right-sha256-full"),
    pytest.param(redirect_loop, id="redirect-loop"),
    pytest.param(server_error_one_line, id="http-500-one-line"),
    pytest.param(truncated_body, id="truncated-body"),
    pytest.param(file_link_on_remote_page, id="file-link-remote-page"),
    pytest.param(data_link_on_remote_page, id="data-link-remote-page"),
    pytest.param(fifo_wheel_path, id="fifo-wheel-path"),
    pytest.param(fifo_file_url, id="fifo-file-url"),
    pytest.param(directory_file_url, id="directory-as-wheel"),
    pytest.param(name_and_wheel_tag_disagree, id="name-tag-mismatch"),
    pytest.param(name_and_elf_disagree_fails_the_gates, id="name-elf-mismatch-fails-gates"),
    pytest.param(all_three_agree, id="name-tag-elf-agree"),
    pytest.param(kernels_marks_ranged_reads_unverified, id="kernels-ranged-unverified"),
    pytest.param(sigterm_removes_partial, id="sigterm-partial"),
    pytest.param(stale_partials_swept, id="stale-partial-swept"),
]


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "UV_INDEX_URL", "NETRC"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    token = net._SESSION.set(net.Session())  # credentials admitted by one class stay there
    found = Lab(tmp_path)
    try:
        yield found
    finally:
        net._SESSION.reset(token)
        for server in found.servers:
            server.close()


@pytest.mark.parametrize("case", CLASSES)
def test_network_class(
    case: Callable[..., None], lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    if "monkeypatch" in case.__code__.co_varnames[: case.__code__.co_argcount]:
        case(lab, monkeypatch)
    else:
        case(lab)


def test_the_corpus_is_large_enough() -> None:
    assert len(CLASSES) >= 35
    assert shutil.which("openssl"), "the TLS realm classes need openssl (Debian's openssl)"
