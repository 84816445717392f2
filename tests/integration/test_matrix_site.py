"""`archgap matrix`: a compatibility matrix from the wheels of a real index on loopback (nginx,
with range requests), its site opened in headless Chromium.

The project demo-kernels is packaged from the fixture libraries nvcc built
(tests/fixtures/cuda/build.sh; what each holds is its nvcc line, and what cuobjdump lists):

- libmix.so: SASS sm_75, sm_90, sm_90a, sm_100a, sm_103f, sm_120, sm_120a; PTX compute_75,
  compute_100f, compute_120a
- libptxonly.so: PTX compute_80 only
- libcomp_default.so: SASS sm_80, sm_120a; PTX compute_90
- libdebug.so: SASS sm_80 only

NVIDIA's rules (CUDA C++ Programming Guide, "Binary Compatibility" and "Application
Compatibility"): SASS sm_XY runs on compute capability X.Z with Z >= Y, never across majors;
sm_XYa only on X.Y itself; PTX compute_XY is JIT-compiled by the driver for any GPU of compute
capability >= X.Y (compute_XYa PTX only on X.Y).

main index: 1.0 = libmix, 2.0 = libptxonly, 3.0 = libcomp_default; extra index ("cu130"):
3.0+cu130 = libdebug and 3.0+cpu without any native file (a CPU build).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import CUDA_BIN, DATA, json_output, run_cli
from tests.loopback_index import NGINX, Listing, make_wheel, nginx_server, write_index

FLASHINFER = [
    DATA / "wheels-jit" / f"flashinfer_python-{v}-py3-none-any.whl" for v in ("0.6.6", "0.6.18")
]
TARGET = ("--python-version", "3.12", "--platform", "manylinux_2_28_x86_64")
ENV = {"PIP_INDEX_URL": "", "PIP_EXTRA_INDEX_URL": "", "PIP_CONFIG_FILE": "/dev/null"}
GPUS = ("--gpu", "7.5", "--gpu", "8.6", "--gpu", "12.0")

pytestmark = pytest.mark.skipif(NGINX is None, reason="scripts/services installs nginx-light")


@dataclass
class Served:
    main: str
    extra: str
    log: Path
    root: Path  # the server's root: srv/
    build: Path
    projects: dict[str, list[Listing]]

    def wheels_asked(self) -> list[str]:
        """The wheel files nginx was asked for (each range request counts), in order."""
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        found = [re.search(r'"GET (\S+) HTTP', line) for line in lines]
        return [m.group(1).rsplit("/", 1)[-1] for m in found if m and ".whl" in m.group(1)]

    def release(self, version: str, lib: str) -> None:
        """A new release on the main index: its pages written again."""
        self.projects["demo-kernels"].append(_demo(self.build / "main", version, lib))
        for kind in ("simple", "json"):
            shutil.rmtree(self.root / "main" / kind)
            write_index(self.root, "main", self.projects, kind)


def _demo(where: Path, version: str, lib: str | None) -> Listing:
    members = {f"demo/{lib}": CUDA_BIN / lib} if lib else {}
    return Listing(make_wheel(where, "demo-kernels", version, members))


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    build = tmp_path / "build"
    (build / "main").mkdir(parents=True)
    (build / "extra").mkdir(parents=True)
    projects = {
        "demo-kernels": [
            _demo(build / "main", "1.0", "libmix.so"),
            _demo(build / "main", "2.0", "libptxonly.so"),
            _demo(build / "main", "3.0", "libcomp_default.so"),
        ],
        "flashinfer-python": [Listing(w) for w in FLASHINFER],
    }
    extras = {
        "demo-kernels": [
            _demo(build / "extra", "3.0+cu130", "libdebug.so"),
            _demo(build / "extra", "3.0+cpu", None),
        ]
    }
    root = tmp_path / "srv"
    for kind in ("simple", "json"):
        write_index(root, "main", projects, kind)
        write_index(root, "cu130", extras, kind)
    prefix = tmp_path / "nginx"
    prefix.mkdir()
    with nginx_server(root, prefix) as url:
        yield Served(f"{url}/main/simple", f"{url}/cu130/json", prefix / "access.log", root,
                     build, projects)  # fmt: skip


def matrix(served: Served, out: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = run_cli("matrix", *args, *GPUS, "--index-url", served.main, "--extra-index-url",
                     served.extra, *TARGET, "--out", str(out), "--json", env=ENV)  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    doc = json_output(result, "matrix")
    on_disk = json.loads((out / "matrix.json").read_text())
    assert on_disk == doc  # the file is the document printed
    return result.returncode, doc


def cells(doc: dict[str, Any], package: str) -> dict[str, list[str]]:
    """version -> the verdicts of its cells (GPU order: 7.5, 8.6, 12.0)."""
    (found,) = [p for p in doc["packages"] if p["package"] == package]
    return {v["version"]: [c["verdict"] for c in v["cells"]] for v in found["variants"]}


def cell(doc: dict[str, Any], package: str, version: str, gpu: str) -> dict[str, Any]:
    (found,) = [p for p in doc["packages"] if p["package"] == package]
    (variant,) = [v for v in found["variants"] if v["version"] == version]
    (one,) = [c for c in variant["cells"] if c["compute_capability"] == gpu]
    return {**one, "wheel": variant["wheel"], "sha256": variant["sha256"]}


def test_each_cell_is_what_the_wheel_holds_by_nvidias_rules(served: Served, tmp_path: Path) -> None:
    """T4 7.5, A10 8.6, RTX PRO 6000 12.0:
    - 3.0+cu130 (sm_80 SASS): none / native (sm_80 runs on 8.6) / none (no SASS of major 12,
      no PTX);
    - 3.0+cpu: no device code anywhere: no-kernels;
    - 3.0 (sm_80, sm_120a SASS, compute_90 PTX): none (nothing <= 7.5) / native (sm_80) /
      native (sm_120a on exactly 12.0);
    - 2.0 (compute_80 PTX only): none / jit / jit, the driver compiling compute_80;
    - 1.0 (sm_75, sm_120 SASS, compute_75 PTX): native / jit (sm_75 SASS cannot cross to
      major 8; the compute_75 PTX is compiled) / native.
    FlashInfer ships no kernels: it builds them at first use, for a 12.0 by its release's
    _normalize_cuda_arch (compilation_context.py): 0.6.6 gives every major >= 9 an 'a' suffix
    with no toolkit check, sm_120a, which nvcc has from CUDA 12.8 (CUDA 12.8 release notes: the
    first with sm_120); 0.6.18 asks for CUDA >= 12.9 (raise 'SM 12.x requires CUDA >= 12.9')
    and builds compute_120f, a family target nvcc has from 12.9: both jit, the toolchain
    named."""
    code, doc = matrix(
        served, tmp_path / "site", "demo-kernels", "flashinfer-python", "Demo_Kernels"
    )
    assert code == 0
    # Demo_Kernels is demo-kernels (PEP 503 names): one page, the first given
    assert [p["package"] for p in doc["packages"]] == ["demo-kernels", "flashinfer-python"]
    assert cells(doc, "demo-kernels") == {
        "3.0+cu130": ["none", "native", "none"],
        "3.0+cpu": ["no-kernels", "no-kernels", "no-kernels"],
        "3.0": ["none", "native", "native"],
        "2.0": ["none", "jit", "jit"],
        "1.0": ["native", "jit", "native"],
    }
    (demo,) = [p for p in doc["packages"] if p["package"] == "demo-kernels"]
    assert demo["releases"] == ["3.0", "2.0", "1.0"]
    # the deciding entry and the member holding it
    a10 = cell(doc, "demo-kernels", "3.0", "8.6")
    assert a10["member"] == "demo/libcomp_default.so" and str(a10["entry"]).startswith("sm_80")
    pro = cell(doc, "demo-kernels", "3.0", "12.0")
    assert str(pro["entry"]).startswith("sm_120a")
    ptx = cell(doc, "demo-kernels", "2.0", "8.6")
    assert ptx["member"] == "demo/libptxonly.so" and str(ptx["entry"]).startswith("compute_80")
    assert "driver" in str(ptx["needs"]) and "compute_80" in str(ptx["needs"])
    t4 = cell(doc, "demo-kernels", "1.0", "7.5")
    assert str(t4["entry"]).startswith("sm_75") and t4["needs"] is None
    # reproducible: the wheel, its sha256 as the file's bytes give it
    import hashlib

    wheel = served.build / "main" / str(t4["wheel"])
    assert t4["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    old = cell(doc, "flashinfer-python", "0.6.6", "12.0")
    assert old["verdict"] == "jit" and "CUDA >= 12.8 (compute_120a" in str(old["needs"])
    new = cell(doc, "flashinfer-python", "0.6.18", "12.0")
    assert new["verdict"] == "jit" and "CUDA >= 12.9 (compute_120f" in str(new["needs"])
    # every cell's evidence is an anchor of its page
    for package in doc["packages"]:
        page = (tmp_path / "site" / package["page"]).read_text()
        for variant in package["variants"]:
            for c in variant["cells"]:
                name, anchor = c["evidence"].split("#")
                assert name == package["page"] and f'id="{anchor}"' in page
    assert 'href="demo-kernels.html"' in (tmp_path / "site" / "index.html").read_text()


def test_a_rerun_fetches_no_wheel_and_a_new_release_only_its_own(
    served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cell is computed once per wheel sha256: the second run (with an empty archgap cache, so
    only the site's matrix-cache.json can answer) asks nginx for no wheel and gives the same
    cells; after a release 4.0 is published, the third asks for 4.0's wheel only; a damaged
    cache file is no error: every wheel is read again."""
    site = tmp_path / "site"
    _, first = matrix(served, site, "demo-kernels")
    asked = served.wheels_asked()
    assert {w.split("-")[1] for w in asked} == {"1.0", "2.0", "3.0", "3.0+cu130", "3.0+cpu"}
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache2"))
    _, second = matrix(served, site, "demo-kernels")
    assert served.wheels_asked() == asked  # nothing more
    assert cells(second, "demo-kernels") == cells(first, "demo-kernels")
    assert second["wheels_read"] == 0 and second["bytes_fetched"] == 0
    served.release("4.0", "libdebug.so")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache3"))
    _, third = matrix(served, site, "demo-kernels")
    new = served.wheels_asked()[len(asked) :]
    assert new and set(new) == {"demo_kernels-4.0-py3-none-manylinux_2_17_x86_64.whl"}
    assert third["wheels_read"] == 1
    # 4.0 holds libdebug (sm_80 SASS only): none / native / none
    assert cells(third, "demo-kernels")["4.0"] == ["none", "native", "none"]
    # a damaged cache answers nothing: every wheel is read again, the same cells
    (site / "matrix-cache.json").write_text('{"format": [1, "x"], "wheels": 7')
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache4"))
    _, fourth = matrix(served, site, "demo-kernels")
    assert fourth["wheels_read"] == 6 and cells(fourth, "demo-kernels") == cells(
        third, "demo-kernels"
    )


class _Dom(HTMLParser):
    """The release rows of the #matrix table and the classes of their cells."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.inside = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "table":
            self.inside = named.get("id") == "matrix"
        elif tag == "tr" and self.inside and named.get("class") == "release":
            self.rows.append([])
        elif tag == "td" and self.inside and self.rows:
            self.rows[-1].append(named.get("class") or "")


def _png_pixels(png: bytes) -> tuple[int, int, int]:
    """(width, height, pixels that are not white) of an 8-bit RGB(A) PNG without interlace."""
    pos, chunks, width, height, kind = 8, [], 0, 0, 0
    while pos < len(png):
        size = int.from_bytes(png[pos : pos + 4], "big")
        tag, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + size]
        if tag == b"IHDR":
            width, height = int.from_bytes(data[:4], "big"), int.from_bytes(data[4:8], "big")
            assert data[8] == 8 and data[12] == 0, "8-bit, not interlaced"
            kind = data[9]
        elif tag == b"IDAT":
            chunks.append(data)
        pos += 12 + size
    step = {2: 3, 6: 4}[kind]
    raw = zlib.decompress(b"".join(chunks))
    stride = width * step
    previous = bytearray(stride)
    coloured = 0
    for y in range(height):
        start = y * (stride + 1)
        kind_filter, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for x in range(stride):
            a = line[x - step] if x >= step else 0
            b, c = previous[x], previous[x - step] if x >= step else 0
            if kind_filter == 1:
                line[x] = (line[x] + a) & 255
            elif kind_filter == 2:
                line[x] = (line[x] + b) & 255
            elif kind_filter == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind_filter == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        coloured += sum(1 for x in range(0, stride, step) if line[x : x + 3] != b"\xff\xff\xff")
        previous = line
    return width, height, coloured


def test_the_page_in_a_browser(served: Served, tmp_path: Path) -> None:
    """The package page as headless Chromium builds it: one row per variant of the last release
    (--versions 1: 3.0+cu130, 3.0+cpu, 3.0), a cell per GPU; the screenshot is of the window's
    size and has coloured cells (not a blank page)."""
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    assert Path(chromium).exists(), "scripts/services installs chromium"
    site = tmp_path / "site"
    code, _ = matrix(served, site, "demo-kernels", "--versions", "1")
    assert code == 0
    page = site / "demo-kernels.html"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", f"--user-data-dir={tmp_path / 'profile'}",
             "--window-size=1000,700"]  # fmt: skip
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    dom = subprocess.run([chromium, *flags, "--dump-dom", page.as_uri()], capture_output=True,
                         text=True, timeout=120, env=env, check=False)  # fmt: skip
    assert dom.returncode == 0, dom.stderr[-2000:]
    parser = _Dom()
    parser.feed(dom.stdout)
    assert len(parser.rows) == 3
    assert all(sum(1 for c in row if "cell" in c) == 3 for row in parser.rows), parser.rows
    png = tmp_path / "matrix.png"
    shot = subprocess.run(
        [chromium, *flags, f"--screenshot={png}", page.as_uri()],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert shot.returncode == 0, shot.stderr[-2000:]
    width, height, coloured = _png_pixels(png.read_bytes())
    assert (width, height) == (1000, 700)
    # nine coloured cells of at least 72 px x 20 px each, besides the text
    assert coloured > 9 * 72 * 20, coloured


def test_each_platform_chooses_its_wheels(served: Served, tmp_path: Path) -> None:
    """--platform twice: the x86-64 wheels and the aarch64 ones are variants of a release. The
    aarch64 wheel of 3.0 holds the x86-64 libcomp_default.so (its ELF machine says so): pip
    installs a wheel by its file name's tags, on aarch64 machines, where x86-64 code cannot
    load: blocked on every GPU, though its SASS would fit the 8.6 (index/wheeltags.py's rule)."""
    wheel = make_wheel(served.build / "main", "demo-kernels", "3.0",
                       {"demo/libcomp_default.so": CUDA_BIN / "libcomp_default.so"},
                       tag="py3-none-manylinux_2_17_aarch64")  # fmt: skip
    served.projects["demo-kernels"].append(Listing(wheel))
    for kind in ("simple", "json"):
        shutil.rmtree(served.root / "main" / kind)
        write_index(served.root, "main", served.projects, kind)
    code, doc = matrix(served, tmp_path / "site", "demo-kernels", "--versions", "1",
                       "--platform", "manylinux_2_28_aarch64")  # fmt: skip
    assert code == 0
    # in the order given (this one before TARGET's), each platform's variants in that order
    assert doc["platforms"] == ["manylinux_2_28_aarch64", "manylinux_2_28_x86_64"]
    (package,) = doc["packages"]
    rows = [
        (v["version"], v["platform"].removeprefix("manylinux_2_28_"),
         [c["verdict"] for c in v["cells"]])
        for v in package["variants"]
    ]  # fmt: skip
    assert rows == [
        ("3.0", "aarch64", ["blocked", "blocked", "blocked"]),
        ("3.0+cu130", "x86_64", ["none", "native", "none"]),
        ("3.0+cpu", "x86_64", ["no-kernels", "no-kernels", "no-kernels"]),
        ("3.0", "x86_64", ["none", "native", "native"]),
    ]
    page = (tmp_path / "site" / "demo-kernels.html").read_text()
    assert "<th>platform</th>" in page and "manylinux_2_28_aarch64" in page


def test_a_wheel_read_with_a_problem_is_read_again(
    served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 5.0 whose file name says x86_64 and whose WHEEL file says aarch64 (a problem of the
    wheel, index/wheeltags.tag_problems): what such a read saw is not kept, so the rerun asks
    for that wheel again, and for no other."""
    built = make_wheel(tmp_path, "demo-kernels", "5.0", {"demo/libmix.so": CUDA_BIN / "libmix.so"},
                       tag="py3-none-manylinux_2_17_aarch64")  # fmt: skip
    misnamed = served.build / "main" / "demo_kernels-5.0-py3-none-manylinux_2_17_x86_64.whl"
    built.rename(misnamed)
    served.projects["demo-kernels"].append(Listing(misnamed))
    for kind in ("simple", "json"):
        shutil.rmtree(served.root / "main" / kind)
        write_index(served.root, "main", served.projects, kind)
    site = tmp_path / "site"
    _, first = matrix(served, site, "demo-kernels", "--versions", "1")
    assert [v["version"] for v in first["packages"][0]["variants"]] == ["5.0"]
    asked = served.wheels_asked()
    assert set(asked) == {misnamed.name}
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache2"))
    _, second = matrix(served, site, "demo-kernels", "--versions", "1")
    again = served.wheels_asked()[len(asked) :]
    assert again and set(again) == {misnamed.name}
    assert second["wheels_read"] == 1
