"""A wheel member too large to hold in memory is read as it streams by (archives/streamread.py);
its dynamic section is kept too, so its needed libraries are judged as an installed file's.

nvidia-curand 10.4.0.35 from PyPI: nvidia/cu13/lib/libcurand.so.10 is 132,698,328 bytes,
deflated in the wheel (more than the 64 MiB read in memory: it is streamed). `readelf -d` of the
installed file (binutils 2.40):

    (NEEDED)   Shared library: [librt.so.1]
    (NEEDED)   Shared library: [libpthread.so.0]
    (NEEDED)   Shared library: [libdl.so.2]
    (NEEDED)   Shared library: [libm.so.6]
    (NEEDED)   Shared library: [libgcc_s.so.1]
    (NEEDED)   Shared library: [libc.so.6]
    (NEEDED)   Shared library: [ld-linux-x86-64.so.2]
    (SONAME)   Library soname: [libcurand.so.10]
    (RUNPATH)  Library runpath: [$ORIGIN]

and `readelf -lW`: its .dynstr is in the first PT_LOAD segment, 111 MB before its dynamic section
(offset 0x6a5fe18), far beyond what the stream keeps behind its position.
"""

from __future__ import annotations

import zipfile

import pytest

from archgap.archives.wheel import IN_MEMORY_MAX, read_wheel
from tests.helpers import DATA

CURAND = next(iter((DATA / "wheels").glob("nvidia_curand-10.4.0.35-*.whl")), None)
MEMBER = "nvidia/cu13/lib/libcurand.so.10"
READELF_NEEDED = (
    "librt.so.1",
    "libpthread.so.0",
    "libdl.so.2",
    "libm.so.6",
    "libgcc_s.so.1",
    "libc.so.6",
    "ld-linux-x86-64.so.2",
)


@pytest.mark.skipif(CURAND is None, reason="scripts/testdata downloads the wheel")
def test_a_streamed_member_keeps_its_needed_libraries_and_runpath() -> None:
    assert CURAND is not None
    with zipfile.ZipFile(CURAND) as zf:
        info = zf.getinfo(MEMBER)
    assert info.file_size > IN_MEMORY_MAX and info.compress_type == zipfile.ZIP_DEFLATED
    contents = read_wheel(str(CURAND))
    (lib,) = [b for b in contents.binaries if b.path.endswith(MEMBER)]
    assert lib.error is None and lib.entries  # its kernels read as before
    assert lib.needed == READELF_NEEDED
    assert lib.runpath == ("$ORIGIN",)
