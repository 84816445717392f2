"""An image's file system from its layers, as streams: nothing is extracted to disk.

One pass reads every layer in order (gzip, zstd or plain tar, decompressed once as it streams)
and applies its tar headers to an in-memory tree: a later layer's file replaces a lower one, a
whiteout ``DIR/.wh.NAME`` deletes ``NAME`` (and what is under it) from the lower layers, and
``DIR/.wh..wh..opq`` makes ``DIR`` opaque (the lower layers' contents of ``DIR`` are gone). A
member is placed as a container runtime unpacks it: its parent directory resolved through the
symlinks already in the tree (``lib/x`` with ``lib -> usr/lib`` is ``/usr/lib/x``), its own name
as it is. The files the caller wants are read in the same pass, as their bytes stream by; the
tree then says, for every path of the final image, which layer's entry provides it, so a value
read for a file a later layer replaced or deleted does not count. ``read_files`` is a second
pass over only the layers that provide a file the first did not read.

Paths are the image's own (``/usr/lib/x.so``). Symlinks are resolved inside the tree, never on
this machine's file system; a loop or a link out of the image is an error for that path only.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import lzma
import posixpath
import tarfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import IO, Generic, TypeVar, cast

from archgap.archives.limits import CappedStream, InflationLimit, layer_allowance
from archgap.image.source import Blob, ImageError, ImageManifest, ImageSource

T = TypeVar("T")
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
MAX_LINK_HOPS = 40  # as the kernel's path resolution (ELOOP)
MAX_MEMBERS = 4_000_000  # tar headers read per image at most
FILE, DIR, SYMLINK, HARDLINK, OTHER = "file", "dir", "symlink", "hardlink", "other"
_READ_ERRORS = (
    OSError, EOFError, tarfile.TarError, zlib.error, lzma.LZMAError, ValueError, InflationLimit
)  # fmt: skip


@dataclass(frozen=True)
class Entry:
    layer: int  # index of the layer that provides it (0: the lowest)
    kind: str  # FILE, DIR, SYMLINK, HARDLINK (to a regular file: ``source``'s ``link``), OTHER
    size: int
    link: str = ""  # a symlink's target as written; a hard link's file: a member of ``source``
    member: str = ""  # the member's own name, where a symlinked directory placed it elsewhere
    source: int = -1  # a hard link's: the layer whose member ``link`` holds its bytes

    def origin(self, path: str) -> tuple[int, str]:
        """(layer, member) that hold the bytes of the file this entry provides at ``path``."""
        if self.kind == HARDLINK:
            return self.source, self.link
        return self.layer, self.member or path


class _Node:
    __slots__ = ("children", "entry")

    def __init__(self, entry: Entry | None) -> None:
        self.entry = entry
        self.children: dict[str, _Node] = {}


class LinkError(Exception):
    """A path that cannot be resolved inside the image: a loop, a dangling or escaping link."""


class NotInImage(LinkError):
    """A path (or a link's target) the image does not have."""


def image_path(name: str) -> str | None:
    """A tar member's name as an absolute image path; None for one that leaves the root."""
    path = posixpath.normpath("/" + name.lstrip("/"))
    return None if "/../" in path + "/" else path


class FileTree:
    """The final file set: image path -> the entry (and layer) that provides it.

    Paths in the tree are real: a member written through a symlinked directory (``lib/x`` with
    ``lib -> usr/lib``) is placed where the image's file system puts it (``/usr/lib/x``), as a
    container runtime unpacks a layer (the parent directory resolved inside the root, the last
    component taken as it is)."""

    def __init__(self) -> None:
        self._root = _Node(Entry(-1, DIR, 0))
        self.members = 0

    def _node(self, path: str) -> _Node | None:
        """The node at ``path`` taken literally (no symlink followed)."""
        node = self._root
        for part in path.strip("/").split("/"):
            if not part:
                continue
            child = node.children.get(part)
            if child is None:
                return None
            node = child
        return node

    def _follow(self, path: str, create: int | None = None) -> tuple[list[str], _Node]:
        """``path`` with every symlink on the way followed inside the image (an absolute link
        from the image's root, ``..`` stopping at it); missing directories are made for layer
        ``create`` (as unpacking a layer makes a member's parents), else ``LinkError``."""
        hops = 0
        done: list[tuple[str, _Node]] = []
        todo = _reversed_parts(path)
        while todo:
            part = todo.pop()
            if part == "." or (part == ".." and not done):
                continue
            if part == "..":
                done.pop()
                continue
            child = self._child(done, part, create)
            entry = child.entry
            assert entry is not None
            if entry.kind == SYMLINK:
                hops += 1
                if hops > MAX_LINK_HOPS:
                    raise LinkError(f"{path}: more than {MAX_LINK_HOPS} symlinks (a loop)")
                if entry.link.startswith("/"):
                    done = []
                todo.extend(_reversed_parts(entry.link))
            elif todo and entry.kind != DIR:
                raise LinkError(f"{_joined(done, part)}: not a directory ({entry.kind})")
            else:
                done.append((part, child))
        return [name for name, _ in done], done[-1][1] if done else self._root

    def _child(self, done: list[tuple[str, _Node]], part: str, create: int | None) -> _Node:
        """The node ``part`` names in the directory ``done`` ends at; a directory made for
        layer ``create`` where it is missing, else ``NotInImage``."""
        node = done[-1][1] if done else self._root
        child = node.children.get(part)
        if child is None:
            if create is None:
                raise NotInImage(f"{_joined(done, part)}: not in the image")
            child = node.children[part] = _Node(Entry(create, DIR, 0))
        return child

    def _directory(self, path: str, create: int | None) -> tuple[str, _Node]:
        """The directory ``path`` names (symlinks followed), as (its real path, its node)."""
        names, node = self._follow(path, create)
        if node.entry is None or node.entry.kind != DIR:
            kind = node.entry.kind if node.entry else "nothing"
            raise LinkError(f"{path}: not a directory ({kind})")
        return "/" + "/".join(names), node

    def place(self, path: str) -> str:
        """Where a member named ``path`` lands: its parent directory resolved, its last
        component as it is. ``LinkError`` for a parent that loops or is not a directory."""
        parent, _, name = path.rpartition("/")
        real = self._directory(parent, None)[0] if parent else ""
        return f"{real.rstrip('/')}/{name}"

    def add(self, path: str, entry: Entry) -> tuple[str, Entry]:
        """A layer's member: replaces what lower layers had where it lands (a directory over a
        directory keeps the lower contents). Returns the real path and the entry kept there
        (naming the member when the two differ); ``LinkError``."""
        parent, _, name = path.rpartition("/")
        real, holder = self._directory(parent, entry.layer)
        real = f"{real.rstrip('/')}/{name}"
        if real != path:
            entry = replace(entry, member=path)
        node = holder.children.get(name)
        lower = node.entry if node is not None else None
        if node is not None and entry.kind == DIR and lower is not None and lower.kind == DIR:
            node.entry = entry
        else:  # anything else, a symlink included, is replaced (not followed)
            holder.children[name] = _Node(entry)
        return real, entry

    def hardlink(self, link: str, layer: int) -> tuple[str, Entry, Entry]:
        """A hard link of ``layer`` to ``link`` (an image path), as a container runtime makes
        it: to what the tree has at ``link`` now (a file of this layer or of a lower one, not
        deleted since), its parent directory resolved, its last component taken as it is (a
        link to a symlink is that symlink). Returns the target's real path, its entry and the
        link's entry; ``LinkError`` for a missing target, a directory or a loop."""
        try:
            real = self.place(link)
        except NotInImage as exc:
            raise NotInImage(f"hard link to {link}: {exc}") from None
        except LinkError as exc:
            raise LinkError(f"hard link to {link}: {exc}") from None
        target = self.get(real)
        if target is None:
            raise NotInImage(f"hard link to {link}: {real}: not in the image")
        if target.kind == DIR:
            raise LinkError(f"hard link to {link}: a directory")
        if target.kind == HARDLINK:
            entry = Entry(layer, HARDLINK, target.size, target.link, source=target.source)
        elif target.kind == FILE:
            entry = Entry(layer, HARDLINK, target.size, target.member or real, source=target.layer)
        else:  # a symlink or a device: the link is one too
            entry = replace(target, layer=layer, member="")
        return real, target, entry

    def whiteout(self, path: str, layer: int) -> None:
        """``.wh.NAME``: ``path`` (a symlink itself, not what it points at) and everything
        under it, from layers below ``layer``, go. ``LinkError`` for a parent that loops."""
        parent, _, name = path.rpartition("/")
        try:
            holder = self._directory(parent, None)[1]
        except NotInImage:
            return  # nothing there to delete
        node = holder.children.get(name)
        if node is not None and node.entry and node.entry.layer < layer:
            del holder.children[name]

    def opaque(self, path: str, layer: int) -> None:
        """``.wh..wh..opq``: the contents of ``path`` (symlinks followed) from layers below
        ``layer`` go. ``LinkError`` for a path that loops or is not a directory."""
        _prune(self._directory(path, layer)[1], layer)

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
        names, node = self._follow(path)
        assert node.entry is not None
        return "/" + "/".join(names), node.entry


def _reversed_parts(path: str) -> list[str]:
    """The names of ``path``'s components, last first (a stack to pop from)."""
    return [p for p in path.split("/") if p][::-1]


def _joined(done: list[tuple[str, _Node]], part: str) -> str:
    return "/" + "/".join([*(name for name, _ in done), part])


def _prune(node: _Node, layer: int) -> None:
    """Drop what layers below ``layer`` put under ``node`` (a directory that only holds this
    layer's files stays, for them)."""
    for name in list(node.children):
        child = node.children[name]
        _prune(child, layer)
        if child.entry is not None and child.entry.layer < layer and not child.children:
            del node.children[name]


@contextlib.contextmanager
def layer_tar(
    source: ImageSource, blob: Blob, what: str
) -> Iterator[tuple[tarfile.TarFile, Iterator[tarfile.TarInfo]]]:
    """A layer's tar and its members, read as a stream: decompressed by its magic bytes (gzip, zstd,
    bzip2, xz or none), whatever the media type claims, and no further than the layer may
    inflate (limits.layer_allowance): a member whose header claims more is not read, and the
    layer ends there with InflationLimit."""
    with contextlib.ExitStack() as stack:
        raw = stack.enter_context(source.open_blob(blob))
        inflated = stack.enter_context(_decompressed(raw, what))
        stream: IO[bytes] = inflated
        capped = None
        if inflated is not raw:
            capped = CappedStream(inflated, blob.size, what, layer_allowance)
            stream = cast(IO[bytes], capped)
        tar = stack.enter_context(tarfile.open(fileobj=stream, mode="r|"))
        yield tar, _claimed(tar, capped)
        while stream.read(1 << 20):  # to the end: the blob's digest is checked there
            pass


def _claimed(tar: tarfile.TarFile, capped: CappedStream | None) -> Iterator[tarfile.TarInfo]:
    """The tar's members, each claimed against the layer's allowance before it is read."""
    for member in tar:
        if capped is not None:
            capped.claim(member.size, member.name)
        yield member


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
    if isinstance(exc, (ImageError, InflationLimit)):
        text = str(exc)
        return text if text.startswith(what) else f"{what}: {text}"
    return f"{what}: cannot read: {type(exc).__name__}: {exc}"


Reader = Callable[[str, IO[bytes], int], T]


@dataclass
class Applied(Generic[T]):
    """What one pass over the layers gave: the final file set, what went wrong (a layer that
    could not be read to its end: what it would have added or deleted after that point is not
    known; members that could not be placed), and the values ``read`` gave for the members
    ``wanted`` chose on the way, by real path, each with the entry it was read for (a value
    counts only while that entry is still the tree's at the path: a later layer may replace or
    delete the file)."""

    tree: FileTree
    problems: list[str]
    values: dict[str, tuple[Entry, T]]

    def value(self, path: str, entry: Entry) -> tuple[bool, T | None]:
        """(True, the value read for ``entry`` at ``path``), or (False, None)."""
        got = self.values.get(path)
        if got is None or got[0] is not entry:
            return False, None
        return True, got[1]


def _no_member(path: str) -> bool:
    return False


def apply_layers(
    source: ImageSource,
    manifest: ImageManifest,
    read: Reader[T] | None = None,
    wanted: Callable[[str], bool] = _no_member,
) -> Applied[T]:
    """The one pass: every layer streamed once, in order, its tar headers applied to the tree,
    and ``read(path, stream, size)`` called for each regular file whose real path ``wanted``
    chooses, as its bytes stream by (a hard link to a file read so gets its value). Nothing
    else of a member is kept."""
    applied: Applied[T] = Applied(FileTree(), [], {})
    for index, blob in enumerate(manifest.layers):
        what = layer_name(manifest, index)
        misplaced: list[str] = []
        try:
            with layer_tar(source, blob, what) as (tar, members):
                for member in members:
                    _apply(applied, tar, member, index, misplaced, read, wanted)
        except (ImageError, *_READ_ERRORS) as exc:
            applied.problems.append(layer_problem(what, exc))
        if misplaced:
            applied.problems.append(_misplaced(what, misplaced))
    return applied


def _misplaced(what: str, reasons: list[str]) -> str:
    more = f"; {len(reasons) - 3} more" if len(reasons) > 3 else ""
    return f"{what}: {len(reasons)} member(s) not applied: {'; '.join(reasons[:3])}{more}"


def _apply(
    applied: Applied[T],
    tar: tarfile.TarFile,
    member: tarfile.TarInfo,
    layer: int,
    misplaced: list[str],
    read: Reader[T] | None,
    wanted: Callable[[str], bool],
) -> None:
    tree = applied.tree
    tree.members += 1
    if tree.members > MAX_MEMBERS:
        raise ImageError(f"more than {MAX_MEMBERS} files in the image's layers")
    path = image_path(member.name)
    if path is None or path == "/":
        return
    parent, _, name = path.rpartition("/")
    try:
        if name == OPAQUE:
            tree.opaque(parent, layer)
        elif name.startswith(WHITEOUT):
            tree.whiteout(f"{parent}/{name[len(WHITEOUT) :]}", layer)
        elif member.islnk():
            _add_hardlink(applied, path, member.linkname, layer, read, wanted)
        else:
            real, entry = tree.add(path, _entry(member, layer))
            if read is not None and entry.kind == FILE and wanted(real):
                stream = tar.extractfile(member)
                if stream is not None:
                    applied.values[real] = (entry, read(real, stream, member.size))
    except LinkError as exc:
        misplaced.append(f"{path}: {exc}")


def _add_hardlink(
    applied: Applied[T],
    path: str,
    linkname: str,
    layer: int,
    read: Reader[T] | None,
    wanted: Callable[[str], bool],
) -> None:
    """A hard link: its entry names the member (of this layer or a lower one) that holds the
    bytes; the value read for that file, if any, is its value too (else a second pass reads
    the member, if wanted: ``read_files``)."""
    link = image_path(linkname)
    if link is None or link == "/":
        raise LinkError(f"hard link to {linkname}: outside the image")
    target_path, target, entry = applied.tree.hardlink(link, layer)
    real, entry = applied.tree.add(path, entry)
    if read is None or entry.kind != HARDLINK or not wanted(real):
        return
    got = applied.values.get(target_path)
    if got is not None and got[0] is target:
        applied.values[real] = (entry, got[1])


def _entry(member: tarfile.TarInfo, layer: int) -> Entry:
    if member.isfile():
        return Entry(layer, FILE, member.size)
    if member.isdir():
        return Entry(layer, DIR, 0)
    if member.issym():
        return Entry(layer, SYMLINK, 0, member.linkname)
    return Entry(layer, OTHER, 0)


def read_files(
    source: ImageSource,
    manifest: ImageManifest,
    wanted: dict[str, Entry],
    read: Reader[T],
) -> tuple[dict[str, T], dict[str, str]]:
    """A second pass, for files the first did not read (a RECORD's file outside the Python
    sites, a symlink's target elsewhere): ``read(path, stream, size)`` for every wanted path
    (image path -> the entry that provides it: a regular file or a hard link to one), each
    member taken from the layer that holds its bytes (a hard link's: the layer of the file it
    links to); layers that hold none are not opened.
    Returns what ``read`` gave and, per path not read, why."""
    by_layer: dict[int, dict[str, list[str]]] = {}
    for path, entry in wanted.items():
        layer, member = entry.origin(path)
        by_layer.setdefault(layer, {}).setdefault(member, []).append(path)
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
    read: Reader[T],
    results: dict[str, T],
) -> None:
    with layer_tar(source, blob, what) as (tar, stored):
        for member in stored:
            paths = members.get(image_path(member.name) or "")
            if not paths or not member.isfile():
                continue
            stream = tar.extractfile(member)
            if stream is None:
                continue
            value = read(paths[0], stream, member.size)  # streamed, never held whole
            for path in paths:  # a file hard-linked under several wanted names: read once
                results[path] = value
