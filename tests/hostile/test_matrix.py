"""Hostile corpus: the pages ``archgap matrix`` writes. What a package index serves is data: a
wheel's member paths, the file URL its project page gives (a query string is the index's to
write) and the name in its METADATA reach the site's pages, its JSON and its evidence. Each class
puts one markup payload in one of those places; the rule (docs/trust.md: inspected artifacts are
data; an HTML page shows a value, never runs it): every page parses to the elements archgap
writes and no others (no script, img, forged heading, no event-handler attribute), the matrix
table keeps its one row per variant and one cell per GPU, the payload shows as text (an entity
as its literal characters: escaped once, never decoded), and matrix.json keeps the value exact.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import CUDA_BIN, json_output, run_cli
from tests.loopback_index import NGINX, make_wheel, nginx_server

PAYLOADS = [
    ("script", "<script>alert(1)</script>"),
    ("attribute", '"><img src=x onerror=alert(1)>'),
    ("table", "</td></tr></table><h1>forged</h1>"),
    ("comment", "<!--"),
    ("entity", "&lt;b&gt;&amp;"),
]
PLACES = ("member", "url")
CLASSES = [(f"{place}-{pid}", place, text) for place in PLACES for pid, text in PAYLOADS] + [
    ("metadata-name-script", "name", "<script>alert(1)</script>"),
    ("metadata-name-attribute", "name", '"><img src=x onerror=alert(1)>'),
]
# the elements archgap's pages are made of
ELEMENTS = {
    "html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "a", "table", "thead",
    "tbody", "tr", "th", "td", "span", "br", "code", "b", "div", "section",
}  # fmt: skip
ENV = {"PIP_INDEX_URL": "", "PIP_EXTRA_INDEX_URL": "", "PIP_CONFIG_FILE": "/dev/null"}

pytestmark = pytest.mark.skipif(NGINX is None, reason="scripts/services installs nginx-light")


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A PEP 691 index with one project per class (``h0``, ``h1``...), each one wheel of
    libmix.so (SASS sm_75 ... sm_120a) carrying the class's payload in its place."""
    root = tmp_path_factory.mktemp("matrix-hostile")
    files = root / "srv" / "idx" / "files"
    files.mkdir(parents=True)
    for number, (_, place, text) in enumerate(CLASSES):
        project = f"h{number}"
        member = f"demo/{text}.so" if place == "member" else "demo/libmix.so"
        wheel = make_wheel(files, project, "1.0", {member: CUDA_BIN / "libmix.so"})
        if place == "name":  # the METADATA's Name says otherwise than the file name
            _rename_metadata(wheel, text)
        url = f"../../files/{wheel.name}" + (f"?x={text}" if place == "url" else "")
        page = root / "srv" / "idx" / "json" / project
        page.mkdir(parents=True)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        listed = {"filename": wheel.name, "url": url, "hashes": {"sha256": digest}}
        doc = {"meta": {"api-version": "1.1"}, "name": project, "files": [listed]}
        (page / "index.json").write_text(json.dumps(doc))
    prefix = root / "nginx"
    prefix.mkdir()
    with nginx_server(root / "srv", prefix) as url:
        yield f"{url}/idx/json"


def _rename_metadata(wheel: Path, name: str) -> None:
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    for member in members:
        if member.endswith("/METADATA"):
            text = members[member].decode().replace("Name: ", f"Name: {name}", 1)
            members[member] = text.encode()
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, data in members.items():
            zf.writestr(member, data)


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.table = False
        self.rows: list[int] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        self.tags.append((tag, named))
        if tag == "table":
            self.table = named.get("id") == "matrix"
        elif tag == "tr" and self.table and named.get("class") == "release":
            self.rows.append(0)
        elif tag == "td" and self.table and self.rows and "cell" in (named.get("class") or ""):
            self.rows[-1] += 1

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def handle_comment(self, data: str) -> None:
        raise AssertionError(f"a comment in the page: {data[:80]!r}")


def _parsed(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text())
    page.close()
    return page


@pytest.mark.parametrize(("place", "text"), [c[1:] for c in CLASSES], ids=[c[0] for c in CLASSES])
def test_matrix_class(index: str, tmp_path: Path, place: str, text: str) -> None:
    number = [c[1:] for c in CLASSES].index((place, text))
    site = tmp_path / "site"
    result = run_cli("matrix", f"h{number}", "--gpu", "12.0", "--gpu", "7.5", "--index-url",
                     index, "--python-version", "3.12", "--platform", "manylinux_2_28_x86_64",
                     "--out", str(site), "--json", env=ENV)  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    doc: dict[str, Any] = json_output(result, "matrix")
    (package,) = doc["packages"]
    (variant,) = package["variants"]
    pages = [site / "index.html", site / package["page"]]
    for path in pages:
        page = _parsed(path)
        for tag, attrs in page.tags:
            assert tag in ELEMENTS, (path.name, tag)
            assert not any(a.lower().startswith("on") for a in attrs), (path.name, attrs)
        assert sum(1 for tag, _ in page.tags if tag == "h1") == 1
    page = _parsed(site / package["page"])
    shown = "".join(page.text)
    if place == "url" and " " in text:
        # a request target has no spaces (RFC 9112 3.2; http.client refuses it): the wheel is
        # not read, its row says unknown and why, the URL shown as text
        assert page.rows == [0] and variant["cells"] == []
        assert "InvalidURL" in variant["problem"] and f"unknown: {variant['problem']}" in shown
        return
    # the libmix wheel read (sm_120 SASS, sm_75 SASS): one row, two cells, both native
    assert page.rows == [2]
    assert [c["verdict"] for c in variant["cells"]] == ["native", "native"]
    if place == "member":
        assert variant["cells"][0]["member"] == f"demo/{text}.so"  # JSON: exact
        assert f"demo/{text}.so" in shown  # the page: as text
    elif place == "url":
        assert variant["url"].endswith(f"?x={text}")
        assert f"?x={text}" in shown
