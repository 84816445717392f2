"""What a streamed library may dlopen (archives/streamnames.py), against the file reader.

Libraries gcc builds here from the C below. From first principles (dlopen(3), the ELF
specification): the library imports dlopen (`nm -D`: U dlopen); its string literals are in
.rodata (read-only), ``writable`` is an array in .data (written, so not read as a name), and a
name after a "/" is a path. So the names it may dlopen are libcublas.so.12, libcudnn.so.9 and
libfoo.so; the library that imports no dlopen opens nothing by name (``()``). Streamed in chunks
of 61 bytes to 1 MiB (a name straddles two chunks), the member must give what the file reader
gives over the same bytes, name for name and in order.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from archgap.archives import streamnames, streamread
from archgap.archives.streamread import read_streamed
from archgap.probe.binary.fatbin import read_binary
from archgap.probe.facts import BinaryFacts
from tests.unit.test_dlopen_rules import NO_DLOPEN, build

SOURCE = r"""
#include <dlfcn.h>
const char *const names[] = {"libcublas.so.12", "libcudnn.so.9", "/opt/x/libpath.so.1",
                             "not a library", "libfoo.so"};
char writable[] = "libwritable.so.3";
void *open_them(int i) { return dlopen(i ? names[i] : writable, RTLD_LAZY); }
"""


def streamed(path: Path, chunk: int) -> BinaryFacts:
    data = path.read_bytes()
    old = streamread.CHUNK
    streamread.CHUNK = chunk
    try:
        return read_streamed("member", io.BytesIO(data[8:]), data[:8], len(data), False)
    finally:
        streamread.CHUNK = old


def test_a_streamed_library_gives_the_names_the_file_reader_does(tmp_path: Path) -> None:
    lib = build(tmp_path, "user", SOURCE)
    installed = read_binary(str(lib))
    assert set(installed.dlopens or ()) == {"libcublas.so.12", "libcudnn.so.9", "libfoo.so"}
    for chunk in (61, 4099, 1 << 20):
        got = streamed(lib, chunk)
        assert (got.error, got.dlopens, got.needed) == (None, installed.dlopens, installed.needed)
    none = build(tmp_path, "nodlopen", NO_DLOPEN)
    assert streamed(none, 4099).dlopens == read_binary(str(none)).dlopens == ()


def test_past_the_bound_the_names_are_not_known_not_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = build(tmp_path, "user", SOURCE)
    monkeypatch.setattr(streamnames, "MAX_CANDIDATES", 1)
    assert streamed(lib, 4099).dlopens is None
