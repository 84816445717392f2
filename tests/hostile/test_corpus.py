"""The hostile corpus as a whole (README.md): every class of every surface is a parametrized case
of a test in ``tests/hostile/test_SURFACE.py``, collected here the way pytest collects it; and
the watch every class runs under (conftest.py) fails a call that modifies what it inspects."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.hostile.conftest import Watch, fingerprint

HERE = Path(__file__).parent
MIN_CLASSES = 300
MIN_SURFACES = 11


def collected() -> dict[str, set[str]]:
    """Surface (the module's name after ``test_``) -> the ids of its classes (``test[id]``)."""
    modules = sorted(str(p) for p in HERE.glob("test_*.py") if p.name != Path(__file__).name)
    listing = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         *modules],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert listing.returncode == 0, listing.stdout[-2000:] + listing.stderr[-2000:]
    classes: dict[str, set[str]] = defaultdict(set)
    for line in listing.stdout.splitlines():
        path, _, test = line.partition("::")
        if "[" in test:  # a parametrized case: one class
            classes[Path(path).stem.removeprefix("test_")].add(test)
    return classes


def test_the_corpus_has_300_classes_across_11_surfaces() -> None:
    classes = collected()
    counts = {surface: len(ids) for surface, ids in classes.items()}
    assert sum(counts.values()) >= MIN_CLASSES, counts
    assert len(counts) >= MIN_SURFACES and min(counts.values()) >= 10, counts


def test_a_call_that_modifies_its_input_fails_the_class(tmp_path: Path) -> None:
    """The watch is what the suite relies on: a stand-in archgap run (code importing archgap)
    that appends a byte to the file it is given is caught, by name."""
    wheel = tmp_path / "demo.whl"
    wheel.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    tamper = "import archgap, sys; open(sys.argv[1], 'ab').write(b'x')"
    with pytest.raises(AssertionError, match=r"archgap modified what it inspected: .*demo\.whl"):
        subprocess.run([sys.executable, "-c", tamper, str(wheel)], check=True)


def test_a_tree_is_compared_without_opening_what_is_not_a_regular_file(tmp_path: Path) -> None:
    """A FIFO in an input tree is never opened (that would hang), a link never followed: both
    are compared by what they are; a byte changed in a file below is seen."""
    tree = tmp_path / "env"
    (tree / "lib").mkdir(parents=True)
    os.mkfifo(tree / "lib" / "pipe")
    (tree / "lib" / "link").symlink_to("/etc/passwd")
    (tree / "lib" / "libk.so").write_bytes(b"\x7fELF")
    watch = Watch(str(tmp_path))
    watch.around(lambda: None, [str(tree)])
    assert watch.checked == [str(tree)]
    kinds = dict(fingerprint(str(tree)))
    assert kinds["lib/link"] == "link -> /etc/passwd" and kinds["lib/pipe"].startswith("p")
    with pytest.raises(AssertionError, match=r"lib/libk\.so"):
        watch.around(lambda: (tree / "lib" / "libk.so").write_bytes(b"\x7fELF\x02"), [str(tree)])
