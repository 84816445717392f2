"""Hostile Python source in a Windows wheel, where the DLL search rule reads what a package adds
with ``os.add_dll_directory`` (probe.environment.dlldirs, through archives.windows).

The rule (docs/trust.md: everything inspected is data; fail closed where a failure would look
healthy): the source is parsed, never run; a module that does not parse, an expression that
refers to itself, grows without end or depends on the environment adds no directory that is
"read": its place is reported as not read, so that a CUDA DLL it might provide is "unknown",
never "found" and never "fails". Each read is bounded (modules and bytes per wheel, steps per
expression): each class asserts the outcome, not a time.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from archgap.archives.wheel import read_wheel
from tests.loopback_index import make_wheel

WIN = "py3-none-win_amd64"
# A PE image the wheel must hold for its modules to be read: the smallest the reader accepts
# as one (MZ header pointing at a PE signature and an x64 COFF header, no sections).
IMAGE = (b"MZ" + b"\0" * 58 + (64).to_bytes(4, "little") + b"PE\0\0"
         + (0x8664).to_bytes(2, "little") + b"\0" * 18)  # fmt: skip

CASES: dict[str, str] = {
    "doubling": "import os\na = 'x'\n" + "a = a + a\n" * 60 + "os.add_dll_directory(a)\n",
    "self-reference": "import os\na = a\nos.add_dll_directory(a)\n",
    "cycle": "import os\na = b\nb = a\nos.add_dll_directory(os.path.join(a, b))\n",
    "nesting-past-the-parser": "import os\nos.add_dll_directory("
    + "os.path.join(" * 300
    + "'x'"
    + ")" * 300
    + ")\n",
    "product-of-lists": "import os\nL = [" + ",".join(f"'d{i}'" for i in range(3000)) + "]\n"
    "os.add_dll_directory(os.path.join(L, L, L, L))\n",
    "not-python": "os.add_dll_directory(\x00\xff\n",
    "environment": "import os\nos.add_dll_directory(os.environ['CUDA_PATH'])\n",
    "starred": "import os\nos.add_dll_directory(*paths)\n",
    "function-result": "import os\nos.add_dll_directory(where())\n",
    "module-as-path": "import os\nos.add_dll_directory(os.path.join(__name__, 'bin'))\n",
    "absolute-windows-path": "import os\nos.add_dll_directory(os.environ.get('X', 'C:\\\\CUDA'))\n",
}


@pytest.mark.parametrize("source", list(CASES.values()), ids=list(CASES))
def test_dlldirs_class(tmp_path: Path, source: str) -> None:
    init = tmp_path / "init.py"
    init.write_bytes(source.encode("utf-8", "surrogateescape"))
    image = tmp_path / "x.dll"
    image.write_bytes(IMAGE)
    wheel = make_wheel(tmp_path, "evil", "1.0", {"evil/x.dll": image, "evil/__init__.py": init},
                       tag=WIN)  # fmt: skip
    with zipfile.ZipFile(wheel) as zf:
        assert "evil/__init__.py" in zf.namelist()
    (dist,) = read_wheel(str(wheel)).distributions
    assert dist.dll_directories == ()
    assert len(dist.dll_directories_unread) == 1
    assert dist.dll_directories_unread[0].startswith(f"{wheel}/evil/__init__.py:")


def test_too_many_modules_leave_a_place_not_read(tmp_path: Path) -> None:
    image = tmp_path / "x.dll"
    image.write_bytes(IMAGE)
    module = tmp_path / "m.py"
    module.write_text("x = 1\n")
    members = {"evil/x.dll": image, **{f"evil/m{i}.py": module for i in range(70)}}
    (dist,) = read_wheel(str(make_wheel(tmp_path, "evil", "1.0", members, tag=WIN))).distributions
    assert dist.dll_directories == ()
    assert [u for u in dist.dll_directories_unread if "not read (70 modules)" in u]
