"""Which variants `versions` lists and the pip line it names, from index entries (no I/O)."""

from __future__ import annotations

from packaging.version import Version

from archgap.index.resolve import PYPI, Candidate, IndexFile
from archgap.index.versions import install_line, variants

VENDOR = "https://vendor.example/whl/cu130"


def candidate(version: str, index: str, tag: str, sha: str | None, rank: int = 0) -> Candidate:
    name = f"pkg-{version}-cp312-cp312-{tag}.whl"
    file = IndexFile(name, f"{index}/files/{name}", sha, None, False)
    return Candidate(Version(version), rank, file, index)


def test_one_wheel_per_version_and_index_the_same_bytes_once() -> None:
    """The best-ranked tag of a version on an index; a mirror's identical file (same sha256)
    is the first index's; newest first, then index order."""
    found = [
        candidate("1.0", PYPI, "manylinux_2_17_x86_64", "a", rank=5),
        candidate("1.0", PYPI, "manylinux_2_28_x86_64", "b", rank=1),
        candidate("1.0", VENDOR, "manylinux_2_28_x86_64", "b"),  # the same bytes as PyPI's
        candidate("1.1", VENDOR, "manylinux_2_28_x86_64", "c"),
        candidate("1.1+cu130", VENDOR, "manylinux_2_28_x86_64", "d"),
    ]
    listed = variants(found, [PYPI, VENDOR])
    assert [(str(c.version), c.index, c.file.sha256) for c in listed] == [
        ("1.1+cu130", VENDOR, "d"),
        ("1.1", VENDOR, "c"),
        ("1.0", PYPI, "b"),
    ]


def test_pip_line_from_pypi_needs_no_index_option() -> None:
    found = [candidate("1.0", PYPI, "manylinux_2_28_x86_64", "a")]
    assert install_line("pkg", found[0], found, [PYPI]) == "pip install pkg==1.0"
    shadow = [*found, candidate("1.0+cu130", VENDOR, "manylinux_2_28_x86_64", "b")]
    assert install_line("pkg", found[0], shadow, [PYPI, VENDOR]) == "pip install pkg===1.0"
    assert (
        install_line("pkg", shadow[1], shadow, [PYPI, VENDOR])
        == f"pip install --extra-index-url {VENDOR} pkg==1.0+cu130"
    )
