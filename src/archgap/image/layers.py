"""An image's file system from its layers, as streams: nothing is extracted to disk.

Pass one reads every layer's tar headers in order (gzip, zstd or plain tar, decompressed as they
stream) and applies them to an in-memory tree: a later layer's file replaces a lower one, a
whiteout ``DIR/.wh.NAME`` deletes ``NAME`` (and what is under it) from the lower layers, and
``DIR/.wh..wh..opq`` makes ``DIR`` opaque (the lower layers' contents of ``DIR`` are gone). The
result says, for every path of the final image, which layer provides it. Pass two streams only
the layers that provide wanted files and hands each wanted member's bytes to the caller.

Paths are the image's own (``/usr/lib/x.so``). Symlinks are resolved inside the tree, never on
this machine's file system; a loop or a link out of the image is an error for that path only.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import lzma
import posixpath
import tarfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, TypeVar, cast

from archgap.image.source import Blob, ImageError, ImageManifest, ImageSource

T = TypeVar("T")
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
MAX_LINK_HOPS = 40  # as the kernel's path resolution (ELOOP)
MAX_MEMBERS = 4_000_000  # tar headers read per image at most
FILE, DIR, SYMLINK, HARDLINK, OTHER = "file", "dir", "symlink", "hardlink", "other"
_READ_ERRORS = (OSError, EOFError, tarfile.TarError, zlib.error, lzma.LZMAError, ValueError)


@dataclass(frozen=True)
class Entry:
    layer: int  # index of the layer that provides it (0: the lowest)
    kind: str  # FILE, DIR, SYMLINK, HARDLINK (to ``link``, a member of the same layer), OTHER
    size: int
    link: str = ""  # a symlink's target as written; a hard link's member (an image path)


class _Node:
    __slots__ = ("children", "entry")

    def __init__(self, entry: Entry | None) -> None:
        self.entry = entry
        self.children: dict[str, _Node] = {}


class LinkError(Exception):
    """A path that cannot be resolved inside the image: a loop, a dangling or escaping link."""


def image_path(name: str) -> str | None:
    """A tar member's name as an absolute image path; None for one that leaves the root."""
    path = posixpath.normpath("/" + name.lstrip("/"))
    return None if "/../" in path + "/" else path


class FileTree:
    """The final file set: image path -> the entry (and layer) that provides it."""

    def __init__(self) -> None:
        self._root = _Node(Entry(-1, DIR, 0))
        self.members = 0

    def _node(self, path: str, create: int | None = None) -> _Node | None:
        node = self._root
        for part in path.strip("/").split("/"):
            if not part:
                continue
            child = node.children.get(part)
            if child is None:
                if create is None:
                    return None
                child = node.children[part] = _Node(Entry(create, DIR, 0))
            node = child
        return node

    def add(self, path: str, entry: Entry) -> None:
        """A layer's member: replaces what lower layers had at ``path``."""
        parent, _, name = path.rpartition("/")
        holder = self._node(parent, entry.layer)
        assert holder is not None
        node = holder.children.get(name)
        if node is None or entry.kind != DIR:
            holder.children[name] = _Node(entry)
        else:  # a directory over a directory: the lower contents stay
            node.entry = entry

    def whiteout(self, path: str, layer: int) -> None:
        """``.wh.NAME``: ``path`` and everything under it, from layers below ``layer``, go."""
        parent, _, name = path.rpartition("/")
        holder = self._node(parent)
        node = holder.children.get(name) if holder else None
        if holder is not None and node is not None and node.entry and node.entry.layer < layer:
            del holder.children[name]

    def opaque(self, path: str, layer: int) -> None:
        """``.wh..wh..opq``: the contents of ``path`` from layers below ``layer`` go."""
        node = self._node(path, layer)
        if node is not None:
            _prune(node, layer)

    def get(self, path: str) -> Entry | None:
        """The entry at ``path`` as written (symlinks not followed)."""
        node = self._node(path)
        return node.entry if node is not None else None

    def children(self, path: str) -> list[str]:
        node = self._node(path)
        return sorted(node.children) if node is not None else []

    def walk(self, path: str = "/") -> Iterator[tuple[str, Entry]]:
        """Every entry under ``path`` (depth first, sorted; symlinked dirs not entered)."""
        start = self._node(path)
        if start is None:
            return
        stack = [(path.rstrip("/"), start)]
        while stack:
            base, node = stack.pop()
            for name in sorted(node.children, reverse=True):
                child = node.children[name]
                child_path = f"{base}/{name}"
                if child.entry is not None:
                    yield child_path, child.entry
                stack.append((child_path, child))

    def resolve(self, path: str) -> tuple[str, Entry]:
        """``path`` with every symlink on the way followed inside the image (absolute links
        from the image's root); ``LinkError`` for a loop, a missing or a dangling path."""
        hops = 0
        done: list[str] = []
        todo = [p for p in path.split("/") if p][::-1]
        while todo:
            part = todo.pop()
            if part == ".":
                continue
            if part == "..":
                done = done[:-1]
                continue
            current = "/" + "/".join([*done, part])
            entry = self.get(current)
            if entry is None:
                raise LinkError(f"{current}: not in the image")
            if entry.kind != SYMLINK:
                done.append(part)
                continue
            hops += 1
            if hops > MAX_LINK_HOPS:
                raise LinkError(f"{path}: more than {MAX_LINK_HOPS} symlinks (a loop)")
            if entry.link.startswith("/"):
                done = []
            todo.extend([p for p in entry.link.split("/") if p][::-1])
        final = "/" + "/".join(done)
        entry = self.get(final)
        assert entry is not None
        return final, entry


def _prune(node: _Node, layer: int) -> None:
    """Drop what layers below ``layer`` put under ``node`` (a directory that only holds this
    layer's files stays, for them)."""
    for name in list(node.children):
        child = node.children[name]
        _prune(child, layer)
        if child.entry is not None and child.entry.layer < layer and not child.children:
            del node.children[name]


@contextlib.contextmanager
def layer_tar(source: ImageSource, blob: Blob, what: str) -> Iterator[tarfile.TarFile]:
    """A layer's tar read as a stream: decompressed by its magic bytes (gzip, zstd, bzip2, xz
    or none), whatever the media type claims."""
    with contextlib.ExitStack() as stack:
        raw = stack.enter_context(source.open_blob(blob))
        stream = stack.enter_context(_decompressed(raw, what))
        tar = stack.enter_context(tarfile.open(fileobj=stream, mode="r|"))
        yield tar
        while stream.read(1 << 20):  # to the end: the blob's digest is checked there
            pass


def _decompressed(raw: IO[bytes], what: str) -> IO[bytes]:
    head = raw.peek(6)[:6] if hasattr(raw, "peek") else b""
    if head[:2] == b"\x1f\x8b":
        return cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="rb"))
    if head[:4] == b"\x28\xb5\x2f\xfd":
        return _zstd(raw, what)
    if head[:3] == b"BZh":
        return bz2.BZ2File(raw)
    if head[:6] == b"\xfd7zXZ\x00":
        return lzma.LZMAFile(raw)
    return raw


def _zstd(raw: IO[bytes], what: str) -> IO[bytes]:
    try:
        import zstandard
    except ImportError:
        raise ImageError(
            f"{what}: a zstd-compressed layer, and the 'zstandard' module is not installed "
            "(pip install zstandard)"
        ) from None
    return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)


def layer_name(manifest: ImageManifest, index: int) -> str:
    blob = manifest.layers[index]
    return f"layer {index + 1}/{len(manifest.layers)} ({blob.digest or blob.location})"


def layer_problem(what: str, exc: Exception) -> str:
    """Why a layer could not be read, named by the layer."""
    if isinstance(exc, ImageError):
        text = str(exc)
        return text if text.startswith(what) else f"{what}: {text}"
    return f"{what}: cannot read: {type(exc).__name__}: {exc}"


def apply_layers(source: ImageSource, manifest: ImageManifest) -> tuple[FileTree, list[str]]:
    """Pass one: the final file set, and what went wrong (a layer that could not be read to
    its end: what it would have added or deleted after that point is not known)."""
    tree = FileTree()
    problems: list[str] = []
    for index, blob in enumerate(manifest.layers):
        what = layer_name(manifest, index)
        try:
            with layer_tar(source, blob, what) as tar:
                for member in tar:
                    _apply(tree, member, index)
        except (ImageError, *_READ_ERRORS) as exc:
            problems.append(layer_problem(what, exc))
    return tree, problems


def _apply(tree: FileTree, member: tarfile.TarInfo, layer: int) -> None:
    tree.members += 1
    if tree.members > MAX_MEMBERS:
        raise ImageError(f"more than {MAX_MEMBERS} files in the image's layers")
    path = image_path(member.name)
    if path is None or path == "/":
        return
    parent, _, name = path.rpartition("/")
    if name == OPAQUE:
        tree.opaque(parent, layer)
    elif name.startswith(WHITEOUT):
        tree.whiteout(f"{parent}/{name[len(WHITEOUT) :]}", layer)
    else:
        tree.add(path, _entry(member, layer))


def _entry(member: tarfile.TarInfo, layer: int) -> Entry:
    if member.isfile():
        return Entry(layer, FILE, member.size)
    if member.isdir():
        return Entry(layer, DIR, 0)
    if member.issym():
        return Entry(layer, SYMLINK, 0, member.linkname)
    if member.islnk():
        return Entry(layer, HARDLINK, 0, image_path(member.linkname) or "")
    return Entry(layer, OTHER, 0)


def read_files(
    source: ImageSource,
    manifest: ImageManifest,
    wanted: dict[str, Entry],
    read: Callable[[str, IO[bytes], int], T],
) -> tuple[dict[str, T], dict[str, str]]:
    """Pass two: ``read(path, stream, size)`` for every wanted path (image path -> the entry
    that provides it: a regular file or a hard link to one), each member taken from the layer
    that provides it; layers that provide none are not opened. Returns what ``read`` gave and,
    per path not read, why."""
    by_layer: dict[int, dict[str, list[str]]] = {}
    for path, entry in wanted.items():
        member = entry.link if entry.kind == HARDLINK else path
        by_layer.setdefault(entry.layer, {}).setdefault(member, []).append(path)
    results: dict[str, T] = {}
    failed: dict[str, str] = {}
    for layer, members in sorted(by_layer.items()):
        what = layer_name(manifest, layer)
        try:
            _read_layer(source, manifest.layers[layer], what, members, read, results)
        except (ImageError, *_READ_ERRORS) as exc:
            reason = layer_problem(what, exc)
        else:
            reason = f"{what}: not found in the layer"
        for paths in members.values():
            failed.update((p, reason) for p in paths if p not in results)
    return results, failed


def _read_layer(
    source: ImageSource,
    blob: Blob,
    what: str,
    members: dict[str, list[str]],
    read: Callable[[str, IO[bytes], int], T],
    results: dict[str, T],
) -> None:
    with layer_tar(source, blob, what) as tar:
        for member in tar:
            paths = members.get(image_path(member.name) or "")
            if not paths or not member.isfile():
                continue
            stream = tar.extractfile(member)
            if stream is None:
                continue
            if len(paths) == 1:
                results[paths[0]] = read(paths[0], stream, member.size)
                continue
            data = stream.read()  # a file hard-linked under several wanted names: read once
            for path in paths:
                results[path] = read(path, io.BytesIO(data), member.size)
