"""Which file names may carry device code: shared libraries (ELF ``.so``; Windows ``.dll`` and
``.pyd``), objects, archives, cubins, fatbins."""

import re

# The suffixes of files that may carry device code.
NATIVE_NAME = re.compile(r"(\.so(\.\d+)*|\.a|\.o|\.cubin|\.fatbin|\.[dD][lL][lL]|\.[pP][yY][dD])$")
# The last characters a native file's name can have: a cheap test before NATIVE_NAME's search
# (a torch environment has ~20,000 names to look at, ~100 of them native).
NATIVE_LAST = frozenset("oan0123456789lLdD")


def is_native_file(path: str) -> bool:
    """A shared library (``x.so``, ``x.so.12``, ``x.dll``, ``x.pyd``), object, archive, cubin or
    fatbin, by name."""
    return path[-1:] in NATIVE_LAST and NATIVE_NAME.search(path) is not None
