"""A requirement resolved to one wheel, like pip, from the user's package indexes.

Indexes: ``--index-url`` (else ``PIP_INDEX_URL``, ``UV_INDEX_URL``, pip's config ``index-url``,
else PyPI), plus every ``--extra-index-url``, ``PIP_EXTRA_INDEX_URL`` and pip's config
``extra-index-url``. A project page is asked for as PEP 691 JSON and read as PEP 503 HTML when
that is what comes back. Candidates from all indexes are pooled; the newest version that the
specifier allows (pre-releases only when it names one, yanked files never) and that has a wheel
for the target interpreter and platform wins, its most specific wheel first, as pip chooses.
Dependencies: ``archgap.index.deps`` (``--deps``).
"""

from __future__ import annotations

import configparser
import json
import os
import urllib.parse
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

from packaging import tags
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from archgap.index import net
from archgap.probe.environment.envvars import hide_url_password

PYPI = "https://pypi.org/simple"
ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"  # noqa: E501
# A project page's files: PyPI's largest pages list tens of thousands; a page past these caps
# is refused before it is parsed (parsing 32 MiB of tiny JSON values takes ~1 GB).
MAX_PAGE_FILES = 200_000
MAX_PAGE_VALUES = 4_000_000  # JSON values (bounded by the commas) on a PEP 691 page
LINK_SCHEMES = ("http", "https")  # what a remote page may link to (pip ignores file: links)


class ResolveError(Exception):
    """No wheel could be chosen; the message says why."""


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str | None
    requires_python: str | None
    yanked: bool
    # PEP 658/714: the index serves the wheel's METADATA at URL + ".metadata" (its sha256, if given)
    metadata: bool = False
    metadata_sha256: str | None = None


@dataclass(frozen=True)
class Resolved:
    requirement: str
    name: str
    version: str
    file: IndexFile
    index: str


def pip_config(environ: dict[str, str]) -> dict[str, str]:
    """``index-url`` and ``extra-index-url`` from pip's config files ([global], then [install]);
    none at all when ``PIP_CONFIG_FILE`` is the null device, as pip does."""
    if environ.get("PIP_CONFIG_FILE") == os.devnull:
        return {}
    home = os.path.expanduser("~")
    xdg = environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    files = ["/etc/pip.conf", "/etc/xdg/pip/pip.conf", os.path.join(home, ".pip", "pip.conf")]
    files += [os.path.join(xdg, "pip", "pip.conf")]
    if environ.get("VIRTUAL_ENV"):
        files.append(os.path.join(environ["VIRTUAL_ENV"], "pip.conf"))
    if environ.get("PIP_CONFIG_FILE"):
        files.append(environ["PIP_CONFIG_FILE"])
    parser = configparser.RawConfigParser()
    try:
        parser.read(files)
    except configparser.Error:
        return {}
    found: dict[str, str] = {}
    for section in ("global", "install"):
        for key in ("index-url", "extra-index-url"):
            if parser.has_option(section, key):
                found[key] = parser.get(section, key)
    return found


def indexes(
    index_url: str | None, extra: list[str], environ: dict[str, str] | None = None
) -> list[str]:
    """The index URLs to ask, main one first, as pip (and uv's UV_INDEX_URL) configure them."""
    env = dict(os.environ) if environ is None else environ
    config = pip_config(env)
    main = (
        index_url
        or env.get("PIP_INDEX_URL")
        or env.get("UV_INDEX_URL")
        or config.get("index-url")
        or PYPI
    )
    extras = list(extra)
    for text in (env.get("PIP_EXTRA_INDEX_URL", ""), config.get("extra-index-url", "")):
        extras.extend(text.split())
    found: list[str] = []
    for url in [main.strip(), *extras]:
        shown = net.admit(url) if url else url  # credentials kept aside, the URL redacted
        if shown and shown not in found:
            found.append(shown)
    return found


class _Links(HTMLParser):
    """The anchors of a PEP 503 page with their data-* attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.links.append(dict(attrs))


class PageTooLarge(ValueError):
    """A page with more entries than ``MAX_PAGE_FILES`` or ``MAX_PAGE_VALUES``."""


def project_files(index: str, name: str) -> list[IndexFile]:
    """The files an index lists for a project; ResolveError for a page it cannot give."""
    url = index.rstrip("/") + "/" + canonicalize_name(name) + "/"
    if url.startswith("file:"):  # a directory index on disk: its page is index.html
        url += "index.html"
    try:
        body, answer = net.fetch_bytes(url, {"Accept": ACCEPT}, net.MAX_PAGE_BYTES)
    except net.NetError as exc:
        raise ResolveError(str(exc)) from None
    kind, base = answer.headers.get_content_type(), answer.geturl()
    shown = hide_url_password(base)
    try:
        if kind == "application/vnd.pypi.simple.v1+json":
            _check_count(body.count(b","), MAX_PAGE_VALUES, "JSON values")
            try:
                files = _json_files(json.loads(body.decode("utf-8", "replace")), base)
            except (ValueError, TypeError, AttributeError, KeyError) as exc:
                why = " ".join(str(exc).split())
                raise ResolveError(f"{shown}: not a PEP 691 project page: {why}") from None
        else:
            _check_count(body.lower().count(b"<a"), MAX_PAGE_FILES, "links")
            parser = _Links()
            parser.feed(body.decode("utf-8", "replace"))
            files = [_html_file(link, base) for link in parser.links if link.get("href")]
    except PageTooLarge as exc:
        raise ResolveError(f"{shown}: {exc}") from None
    return [f for f in files if _linkable(f.url, base)]


def _check_count(count: int, cap: int, what: str) -> None:
    if count > cap:
        raise PageTooLarge(f"more than {cap:,} {what} on the page: over the cap, not parsed")


def _linkable(url: str, page: str) -> bool:
    """Whether a page may send archgap to ``url``: a remote page only to http(s) URLs (pip
    ignores its file: links); a page on disk also to files."""
    scheme = urllib.parse.urlsplit(url).scheme
    local = urllib.parse.urlsplit(page).scheme == "file"
    return scheme in LINK_SCHEMES or (local and scheme == "file")


def _json_files(data: Any, base: str) -> list[IndexFile]:
    files = []
    for item in data["files"]:
        hashes = item.get("hashes") or {}
        files.append(
            IndexFile(
                str(item["filename"]),
                net.admit(urllib.parse.urljoin(base, str(item["url"]))),
                hashes.get("sha256"),
                item.get("requires-python"),
                bool(item.get("yanked")),
                *_metadata_hash(item.get("core-metadata", item.get("dist-info-metadata"))),
            )
        )
    return files


def _metadata_hash(value: Any) -> tuple[bool, str | None]:
    """(served, sha256) of PEP 658 metadata: JSON ``true`` or a dict of hashes; HTML ``true`` or
    ``sha256=...``; absent or false when the index does not serve it."""
    if isinstance(value, dict):
        digest = value.get("sha256")
        return True, digest if isinstance(digest, str) else None
    if isinstance(value, str):
        algorithm, _, digest = value.partition("=")
        return True, digest if algorithm == "sha256" and digest else None
    return bool(value), None


def _html_file(link: dict[str, str | None], base: str) -> IndexFile:
    href = urllib.parse.urljoin(base, link["href"] or "")
    url, _, fragment = href.partition("#")
    algorithm, _, digest = fragment.partition("=")
    name = urllib.parse.unquote(os.path.basename(urllib.parse.urlsplit(url).path))
    return IndexFile(
        name,
        net.admit(url),
        digest if algorithm == "sha256" else None,
        link.get("data-requires-python"),
        "data-yanked" in link,
        *_metadata_hash(link.get("data-core-metadata", link.get("data-dist-info-metadata"))),
    )


def supported_tags(python_version: str | None, platform: str | None) -> list[tags.Tag]:
    """The wheel tags an interpreter of that version on that platform installs, best first
    (this interpreter's own when neither is given)."""
    if python_version is None and platform is None:
        return list(tags.sys_tags())
    version = tuple(int(p) for p in python_version.split(".")[:2]) if python_version else None
    platforms = _platforms(platform) if platform else None
    found = list(tags.cpython_tags(version, platforms=platforms))
    found += list(tags.compatible_tags(version, platforms=platforms))
    return found


def _platforms(platform: str) -> list[str]:
    """pip's expansion of ``--platform manylinux_2_28_x86_64``: every older glibc too."""
    prefix, _, arch = platform.partition("_2_")
    if prefix != "manylinux":
        return [platform]
    minor_text, _, machine = arch.partition("_")
    if not minor_text.isdigit():
        return [platform]
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    found = []
    for minor in range(int(minor_text), -1, -1):
        found.append(f"manylinux_2_{minor}_{machine}")
        if minor in legacy:
            found.append(f"{legacy[minor]}_{machine}")
    return [*found, f"linux_{machine}"]


@dataclass(frozen=True)
class Candidate:
    """A wheel the target can install: its version, its tag's rank (0 is the best) and index."""

    version: Version
    rank: int
    file: IndexFile
    index: str


def parse_requirement(text: str) -> Requirement:
    try:
        return Requirement(text)
    except InvalidRequirement as exc:
        raise ResolveError(f"not a file, URL or requirement: {exc}") from None


def candidates(
    requirement: Requirement,
    index_urls: list[str],
    python_version: str | None = None,
    platform: str | None = None,
    problems: list[str] | None = None,
) -> list[Candidate]:
    """Every wheel of every index that the requirement allows and the target can install, in
    index order; ResolveError says why there is none. An index that cannot give the project's
    page is skipped (as pip skips it), and said in ``problems``."""
    supported = {tag: rank for rank, tag in enumerate(supported_tags(python_version, platform))}
    target_python = Version(python_version) if python_version else None
    found: list[Candidate] = []
    seen = 0
    problems = [] if problems is None else problems
    for index in index_urls:
        try:
            files = project_files(index, requirement.name)
        except ResolveError as exc:
            problems.append(str(exc))
            continue
        for file in files:
            seen += 1
            fit = _candidate(file, requirement, supported, target_python)
            if fit is not None:
                found.append(Candidate(fit[0], fit[1], file, index))
    # pip's rule: pre-releases only when the specifier names one or nothing else fits
    allowed = set(requirement.specifier.filter({c.version for c in found}))
    found = [c for c in found if c.version in allowed]
    if not found:
        raise _no_wheel(len(index_urls), seen, problems, python_version, platform)
    return found


def _no_wheel(
    indexes: int, seen: int, problems: list[str], python_version: str | None, platform: str | None
) -> ResolveError:
    """Why no wheel fits: the indexes' problems when none listed a file, else the count."""
    why = "; ".join(problems) if problems and not seen else f"{seen} files listed"
    python = f"Python {python_version}" if python_version else "this Python"
    target = f"{python} on {platform or 'this platform'}"
    return ResolveError(f"no wheel for {target} in {indexes} index(es) ({why})")


def resolve(
    text: str,
    index_urls: list[str],
    python_version: str | None = None,
    platform: str | None = None,
) -> Resolved:
    """The wheel pip would choose for requirement ``text``; ResolveError says why there is none."""
    requirement = parse_requirement(text)
    found = candidates(requirement, index_urls, python_version, platform)
    # the newest version, its best-ranked wheel; the first index on a tie
    best = max(enumerate(found), key=lambda c: (c[1].version, -c[1].rank, -c[0]))[1]
    return Resolved(text, requirement.name, str(best.version), best.file, best.index)


def _candidate(
    file: IndexFile,
    requirement: Requirement,
    supported: dict[tags.Tag, int],
    target_python: Version | None,
) -> tuple[Version, int] | None:
    """(version, tag rank) of a wheel that fits the requirement and the target, else None."""
    if file.yanked or not file.filename.endswith(".whl"):
        return None
    try:
        name, version, _, wheel_tags = parse_wheel_filename(file.filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None
    if name != canonicalize_name(requirement.name):
        return None
    if not requirement.specifier.contains(version, prereleases=True):
        return None
    if file.requires_python and target_python is not None:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            if not SpecifierSet(file.requires_python).contains(target_python):
                return None
        except InvalidSpecifier:
            pass
    ranks = [supported[t] for t in wheel_tags if t in supported]
    return (version, min(ranks)) if ranks else None
