"""Finding a byte string in a file's bytes fast: the C library's ``memmem`` where ctypes can call
it, else the buffer's own ``find``.

A deep read searches ~0.8 GB of data sections of a torch environment for two needles. CPython's
``find`` (bytes and mmap alike) steps a few bytes at a time: ~1.5 GB/s here. glibc's ``memmem``
skips by pairs of bytes: 3.2 GB/s for the 8-byte container header and 4.8 GB/s for the 7-byte
cubin ident on the same bytes (measured on the data sections of that environment). Both give
the first occurrence in the range, so what is found does not depend on which one ran.

The buffer's address comes from the buffer protocol (``PyObject_GetBuffer``: a read-only mmap
has no other way to it), held only while ``searcher`` is open. Without ctypes, ``memmem`` or
``pythonapi`` (PyPy), or for a buffer that does not export one, ``find`` does the work. Given
the needles it will be asked for, ``searcher`` finds them all in one pass where it can
(``literals``: Hyperscan).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence, Tuple

from .literals import Find, block_index

# Below this many bytes the set-up of a ctypes search (~5 us) costs more than it saves.
MEMMEM_MIN = 64 << 10

_memmem: Any = None  # libc's memmem, with its argument types; False once known to be missing
_py_buffer: Any = None  # the ctypes type of a Py_buffer, made once


def _load() -> Any:
    global _memmem
    if _memmem is None:  # set once, whole: threads reading wheel members may get here together
        found: Any = False
        try:
            import ctypes

            function = ctypes.CDLL(None).memmem
            function.restype = ctypes.c_void_p
            function.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t)
            ctypes.pythonapi.PyObject_GetBuffer  # noqa: B018 (CPython only: raises elsewhere)
            found = function
        except (ImportError, OSError, AttributeError):
            pass
        _memmem = found
    return _memmem


def _buffer_struct() -> Any:
    """A new ``Py_buffer`` (the same layout from CPython 3.3 on; limited API since 3.11)."""
    global _py_buffer
    if _py_buffer is None:
        import ctypes

        pointer, size = ctypes.c_void_p, ctypes.c_ssize_t

        class PyBuffer(ctypes.Structure):
            _fields_ = [
                ("buf", pointer),
                ("obj", pointer),
                ("len", size),
                ("itemsize", size),
                ("readonly", ctypes.c_int),
                ("ndim", ctypes.c_int),
                ("format", pointer),
                ("shape", pointer),
                ("strides", pointer),
                ("suboffsets", pointer),
                ("internal", pointer),
            ]

        _py_buffer = PyBuffer
    return _py_buffer()


@contextlib.contextmanager
def searcher(
    buf: Any, start: int, end: int, needles: Sequence[bytes] = ()
) -> Iterator[Tuple[Find, bool]]:
    """(``find(needle, start, end)`` over ``buf``, whether it is ``memmem``) for searches in
    [``start``, ``end``): ``memmem`` when that range is large enough and ctypes can reach the
    bytes (``buf``: any object with the buffer protocol and a ``find``: mmap, bytes), else
    ``buf.find``. Both return the first occurrence that lies wholly in the range, or -1.
    ``needles``: the ones the caller will look for, found in one pass where ``hyperscan`` is
    installed (``literals``: the same answers)."""
    memmem: Any = _load() if end - start >= MEMMEM_MIN else None
    if not memmem:
        yield buf.find, False
        return
    import ctypes

    view = _buffer_struct()
    try:
        ctypes.pythonapi.PyObject_GetBuffer(ctypes.py_object(buf), ctypes.byref(view), 0)
    except (TypeError, ValueError, BufferError, OSError):  # no buffer to export
        yield buf.find, False
        return
    base, length = view.buf or 0, view.len

    def find(needle: bytes, first: int, stop: int) -> int:
        first, stop = max(first, 0), min(stop, length)
        if stop - first < len(needle):
            return -1
        at = memmem(base + first, stop - first, needle, len(needle))
        return -1 if at is None else at - base

    index = block_index(buf, start, end, needles, find)
    try:
        yield (index.find if index is not None else find), True
    finally:
        if index is not None:
            index.close()
        ctypes.pythonapi.PyBuffer_Release(ctypes.byref(view))


__all__ = ["MEMMEM_MIN", "Find", "searcher"]
