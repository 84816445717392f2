"""A real package index on loopback for the tests: wheels built from the fixture binaries (nvcc
output, tests/fixtures/cuda/bin) or taken from tests/.data, PEP 503 HTML and PEP 691 JSON pages
(with PEP 658 metadata files where asked), served by Python's http.server (no range support) and
by nginx (Debian's nginx-light, installed by scripts/services: range requests)."""

from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import json
import shutil
import socket
import subprocess
import threading
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from tests.helpers import wait_for_port

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
LINUX = "py3-none-manylinux_2_17_x86_64"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def metadata_text(name: str, version: str, requires: Sequence[str] = ()) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    return "\n".join(lines) + "\n"


def make_wheel(
    directory: Path,
    name: str,
    version: str,
    members: dict[str, Path],
    requires: Sequence[str] = (),
    tag: str = LINUX,
) -> Path:
    """A wheel as bdist_wheel writes one: the members, METADATA (with Requires-Dist), WHEEL
    and a RECORD listing them all."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    files: dict[str, bytes] = {m: p.read_bytes() for m, p in members.items()}
    files[f"{info}/METADATA"] = metadata_text(name, version, requires).encode()
    wheel_file = ["Wheel-Version: 1.0", "Generator: archgap-tests", "Root-Is-Purelib: false"]
    files[f"{info}/WHEEL"] = "\n".join([*wheel_file, f"Tag: {tag}", ""]).encode()
    record = [f"{m},{_record_hash(data)},{len(data)}" for m, data in files.items()]
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    path = directory / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, data in files.items():
            zf.writestr(member, data)
    return path


@dataclass
class Listing:
    """One file of a project page: its attributes, and whether PEP 658 metadata is served."""

    path: Path  # the wheel (or any file name for a decoy that is never fetched)
    attrs: dict[str, str] = field(default_factory=dict)  # data-yanked, data-requires-python
    metadata: bool = False


def write_index(root: Path, name: str, projects: dict[str, list[Listing]], kind: str) -> str:
    """An index under ``root/name``: ``simple/`` (PEP 503 HTML) or ``json/`` (PEP 691) pages
    and ``files/``; returns the index's path below the server root."""
    files = root / name / "files"
    files.mkdir(parents=True, exist_ok=True)
    for project, entries in projects.items():
        html = ["<!DOCTYPE html><html><body>"]
        listed = []
        for entry in entries:
            target = files / entry.path.name
            if entry.path.exists() and not target.exists():
                target.symlink_to(entry.path.resolve())
            digest = sha256(entry.path) if entry.path.exists() else None
            attrs = dict(entry.attrs)
            meta: dict[str, str] = {}
            if entry.metadata:
                data = _wheel_metadata(entry.path)
                (files / f"{entry.path.name}.metadata").write_bytes(data)
                meta = {"sha256": hashlib.sha256(data).hexdigest()}
                attrs["data-core-metadata"] = f"sha256={meta['sha256']}"
            fragment = f"#sha256={digest}" if digest else ""
            extra = "".join(f' {k}="{v}"' if v else f" {k}" for k, v in attrs.items())
            href = f"../../files/{entry.path.name}"
            html.append(f'<a href="{href}{fragment}"{extra}>{entry.path.name}</a>')
            item: dict[str, object] = {
                "filename": entry.path.name,
                "url": href,
                "hashes": {"sha256": digest} if digest else {},
                "requires-python": attrs.get("data-requires-python"),
                "yanked": "data-yanked" in attrs,
            }
            if meta:
                item["core-metadata"] = meta
            listed.append(item)
        page = root / name / kind / project
        page.mkdir(parents=True)
        if kind == "simple":
            (page / "index.html").write_text("\n".join(html) + "</body></html>\n")
        else:
            doc = {"meta": {"api-version": "1.1"}, "name": project, "files": listed}
            (page / "index.json").write_text(json.dumps(doc))
    return f"{name}/{kind}"


def _wheel_metadata(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        member = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        return zf.read(member)


class CountingHandler(http.server.SimpleHTTPRequestHandler):
    """http.server's static files (it ignores Range: a whole 200), each path asked recorded."""

    requests: ClassVar[list[str]] = []

    def log_message(self, format: str, *args: object) -> None:
        CountingHandler.requests.append(self.path)


@contextmanager
def plain_server(root: Path) -> Iterator[str]:
    handler = functools.partial(CountingHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def nginx_server(root: Path, prefix: Path) -> Iterator[str]:
    """nginx serving ``root`` with range support (its default for static files); JSON pages
    (``index.json`` under a ``json/`` directory) with the PEP 691 content type. Its access log
    is ``prefix/access.log``."""
    assert NGINX is not None, "scripts/services installs nginx-light"
    port = free_port()
    conf = prefix / "nginx.conf"
    conf.write_text(
        f"""daemon off; master_process off; error_log {prefix}/error.log; pid {prefix}/nginx.pid;
events {{ worker_connections 64; }}
http {{
  access_log {prefix}/access.log;
  client_body_temp_path {prefix}; proxy_temp_path {prefix}; fastcgi_temp_path {prefix};
  uwsgi_temp_path {prefix}; scgi_temp_path {prefix};
  types {{ text/html html; application/octet-stream whl; }}
  server {{
    listen 127.0.0.1:{port};
    root {root};
    location ~ /json/ {{ index index.json; default_type application/vnd.pypi.simple.v1+json;
                        types {{ }} }}
  }}
}}
"""
    )
    proc = subprocess.Popen([NGINX, "-p", str(prefix), "-c", str(conf)], stderr=subprocess.PIPE)
    try:
        wait_for_port("127.0.0.1", port, 10)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
