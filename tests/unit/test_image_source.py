"""The OCI/Docker JSON every image source shares (platforms, index selection, descriptors,
digests) and the layer tree (whiteouts, opaque directories, symlinks resolved inside the image).
The expectations are the OCI image spec's rules: image-index.md (platform, nested indexes),
descriptor.md (digest, size), layer.md (whiteouts, opaque whiteouts)."""

from __future__ import annotations

import hashlib
import io
import json

import pytest

from archgap.image.layers import DIR, FILE, SYMLINK, Entry, FileTree, LinkError
from archgap.image.source import (
    OCI_INDEX,
    OCI_MANIFEST,
    Blob,
    ImageError,
    Platform,
    choose,
    descriptor,
    parse_platform,
    resolve,
    verified,
)


def test_platforms_are_read_in_every_spelling_users_give() -> None:
    assert parse_platform("linux/arm64") == Platform("linux", "arm64")
    assert parse_platform("linux/arm64/v8") == Platform("linux", "arm64", "v8")
    assert parse_platform("aarch64") == Platform("linux", "arm64")
    assert parse_platform("x86_64") == Platform("linux", "amd64")
    # the wheel platform tag scan --platform already takes for requirements
    assert parse_platform("manylinux_2_28_aarch64") == Platform("linux", "arm64")
    with pytest.raises(ValueError, match="give os/arch"):
        parse_platform("linux/arm64/v8/extra")


def entry(arch: str, digest: str, variant: str = "", os: str = "linux") -> dict[str, object]:
    platform = {"os": os, "architecture": arch, **({"variant": variant} if variant else {})}
    return {"mediaType": OCI_MANIFEST, "digest": digest, "size": 10, "platform": platform}


D1, D2, D3 = ("sha256:" + c * 64 for c in "123")


def test_an_index_entry_is_chosen_by_platform_and_attestations_never() -> None:
    index = {
        "manifests": [
            entry("unknown", D3, os="unknown"),  # buildx attestation manifests
            entry("amd64", D1),
            entry("arm64", D2, "v8"),
        ]
    }
    assert choose(index, Platform("linux", "amd64"), "x").digest == D1
    # arm64 without a variant means v8, with one it must match
    assert choose(index, Platform("linux", "arm64"), "x").digest == D2
    assert choose(index, Platform("linux", "arm64", "v8"), "x").digest == D2
    with pytest.raises(ImageError, match=r"no image for linux/arm64/v7 \(the index has: "):
        choose(index, Platform("linux", "arm64", "v7"), "x")
    single = {"manifests": [{"mediaType": OCI_MANIFEST, "digest": D1, "size": 3}]}
    assert choose(single, Platform("linux", "s390x"), "x").digest == D1


def test_descriptors_must_carry_a_checkable_digest_and_a_size() -> None:
    assert descriptor({"mediaType": "m", "digest": D1, "size": 0}, "x") == Blob(D1, "m", 0)
    bad: object
    for bad in (
        {"digest": "md5:abc", "size": 1},
        {"digest": D1, "size": -1},
        {"digest": D1, "size": True},
        {"digest": D1},
        [],
    ):
        with pytest.raises(ImageError):
            descriptor(bad, "x")


def blob_of(doc: dict[str, object]) -> tuple[bytes, Blob]:
    data = json.dumps(doc).encode()
    return data, Blob(
        "sha256:" + hashlib.sha256(data).hexdigest(), str(doc["mediaType"]), len(data)
    )


def test_nested_indexes_are_followed_to_the_platform_manifest() -> None:
    config, config_blob = blob_of({"mediaType": "c", "architecture": "arm64", "os": "linux"})
    manifest, manifest_blob = blob_of(
        {"mediaType": OCI_MANIFEST, "config": vars_of(config_blob), "layers": []}
    )
    inner, inner_blob = blob_of(
        {"mediaType": OCI_INDEX, "manifests": [{**vars_of(manifest_blob), "platform": {
            "os": "linux", "architecture": "arm64"}}]}
    )  # fmt: skip
    top = json.dumps({"mediaType": OCI_INDEX, "manifests": [vars_of(inner_blob)]}).encode()
    store = {b.digest: d for d, b in ((config, config_blob), (manifest, manifest_blob))}
    store[inner_blob.digest] = inner
    image = resolve(top, OCI_INDEX, lambda b: store[b.digest], Platform("linux", "arm64"), "t")
    assert image.digest == manifest_blob.digest
    assert str(image.platform) == "linux/arm64" and image.layers == ()
    # a single image of another platform than the one asked for is refused
    with pytest.raises(ImageError, match="the image is linux/arm64, not linux/amd64"):
        resolve(manifest, OCI_MANIFEST, lambda b: store[b.digest], Platform("linux", "amd64"), "t")


def vars_of(blob: Blob) -> dict[str, object]:
    return {"mediaType": blob.media_type, "digest": blob.digest, "size": blob.size}


def test_a_blob_stream_is_checked_against_its_descriptor_at_its_end() -> None:
    data = b"layer bytes" * 100
    good = Blob("sha256:" + hashlib.sha256(data).hexdigest(), "m", len(data))
    assert verified(io.BytesIO(data), good, "b").read() == data
    with pytest.raises(ImageError, match="content does not match its digest"):
        verified(io.BytesIO(data[:-1] + b"X"), good, "b").read()
    with pytest.raises(ImageError, match="1099 bytes, the descriptor says 1100"):
        verified(io.BytesIO(data[:-1]), good, "b").read()


def tree_of(*layers: list[tuple[str, Entry | None]]) -> FileTree:
    """Layers of (path, entry); None: the path is a whiteout (its name carries .wh.)."""
    tree = FileTree()
    for number, members in enumerate(layers):
        for path, found in members:
            name = path.rsplit("/", 1)[-1]
            if name == ".wh..wh..opq":
                tree.opaque(path.rsplit("/", 1)[0], number)
            elif name.startswith(".wh."):
                tree.whiteout(path.rsplit("/", 1)[0] + "/" + name[4:], number)
            else:
                assert found is not None
                tree.add(path, found)
    return tree


def f(layer: int) -> Entry:
    return Entry(layer, FILE, 1)


def d(layer: int) -> Entry:
    return Entry(layer, DIR, 0)


def test_whiteouts_delete_lower_layers_only_and_opaque_keeps_its_own_layer() -> None:
    tree = tree_of(
        [("/a", d(0)), ("/a/x", f(0)), ("/a/sub/y", f(0)), ("/b/z", f(0))],
        [("/a/.wh.sub", None), ("/b/.wh..wh..opq", None), ("/b/new", f(1)), ("/a/x", f(1))],
        [("/a/sub/again", f(2))],
    )
    files = {p: e.layer for p, e in tree.walk("/") if e.kind == FILE}
    # /a/sub and what was under it: gone (whiteout of a directory); /b/z: gone (opaque), /b/new
    # stays (same layer as the opaque marker); /a/x: layer 1's copy; /a/sub/again: a later layer
    assert files == {"/a/x": 1, "/b/new": 1, "/a/sub/again": 2}


def test_symlinks_resolve_inside_the_tree_with_loops_and_escapes_reported() -> None:
    tree = tree_of(
        [
            ("/usr/lib/libreal.so", f(0)),
            ("/lib", Entry(0, SYMLINK, 0, "usr/lib")),
            ("/usr/lib/abs.so", Entry(0, SYMLINK, 0, "/lib/libreal.so")),
            ("/usr/lib/up.so", Entry(0, SYMLINK, 0, "../../../../../usr/lib/libreal.so")),
            ("/usr/lib/l1", Entry(0, SYMLINK, 0, "l2")),
            ("/usr/lib/l2", Entry(0, SYMLINK, 0, "l1")),
            ("/usr/lib/dangling.so", Entry(0, SYMLINK, 0, "/etc/passwd")),
        ]
    )
    assert tree.resolve("/usr/lib/abs.so")[0] == "/usr/lib/libreal.so"
    assert tree.resolve("/lib/libreal.so")[0] == "/usr/lib/libreal.so"
    assert tree.resolve("/usr/lib/up.so")[0] == "/usr/lib/libreal.so"  # '..' stops at the root
    with pytest.raises(LinkError, match="a loop"):
        tree.resolve("/usr/lib/l1")
    with pytest.raises(LinkError, match="/etc: not in the image"):
        tree.resolve("/usr/lib/dangling.so")


def link(layer: int, target: str) -> Entry:
    return Entry(layer, SYMLINK, 0, target)


def files_of(tree: FileTree) -> dict[str, int]:
    return {p: e.layer for p, e in tree.walk("/") if e.kind == FILE}


def test_members_are_placed_through_symlinked_directories_as_a_runtime_unpacks_them() -> None:
    """A member's parent directory is resolved inside the image (links of earlier layers and of
    the same layer, relative or absolute, '..' stopping at the root); its own name is not."""
    tree = tree_of(
        [
            ("/usr/lib/old.so", f(0)),
            ("/lib", link(0, "usr/lib")),  # Debian's merged /usr
            ("/opt/miniforge/conda-meta", d(0)),
            ("/opt/conda", link(0, "/opt/miniforge")),
            ("/usr/local/lib64", d(0)),
            ("/usr/local/lib", link(0, "lib64")),
            ("/usr/local/lib/python3.12/x.so", f(0)),  # the same layer's link
            ("/usr/lib/up", link(0, "../../../../..")),
        ],
        [
            ("/lib/new.so", f(1)),
            ("/opt/conda/lib/python3.11/y.so", f(1)),
            ("/usr/lib/up/etc/z.so", f(1)),  # climbs to the image's root, never above it
        ],
    )
    assert files_of(tree) == {
        "/usr/lib/old.so": 0,
        "/usr/lib/new.so": 1,
        "/opt/miniforge/lib/python3.11/y.so": 1,
        "/usr/local/lib64/python3.12/x.so": 0,
        "/etc/z.so": 1,
    }
    placed = tree.get("/usr/lib/new.so")
    assert placed is not None and placed.member == "/lib/new.so"  # the name it was read by
    assert tree.resolve("/lib/new.so")[0] == "/usr/lib/new.so"


def test_whiteouts_and_opaque_markers_go_through_symlinked_parents_and_delete_links() -> None:
    tree = tree_of(
        [
            ("/usr/lib/a.so", f(0)),
            ("/usr/lib/b.so", f(0)),
            ("/usr/share/c.so", f(0)),
            ("/lib", link(0, "usr/lib")),
            ("/share", link(0, "usr/share")),
            ("/opt/miniforge/d.so", f(0)),
            ("/opt/conda", link(0, "/opt/miniforge")),
        ],
        [("/lib/.wh.a.so", None), ("/share/.wh..wh..opq", None), ("/opt/.wh.conda", None)],
        [("/opt/conda/e.so", f(2))],  # a real directory now, where the link was
    )
    assert files_of(tree) == {"/usr/lib/b.so": 0, "/opt/miniforge/d.so": 0, "/opt/conda/e.so": 2}
    conda = tree.get("/opt/conda")
    assert conda is not None and conda.kind == DIR
    # a directory member over a link replaces the link (Lstat, not Stat), as runtimes do
    over = tree_of([("/usr/lib/a.so", f(0)), ("/lib", link(0, "usr/lib"))], [("/lib", d(1))])
    replaced = over.get("/lib")
    assert replaced is not None and replaced.kind == DIR and over.children("/lib") == []


def test_a_member_through_a_loop_or_a_file_is_refused_with_the_reason() -> None:
    tree = tree_of([("/a", link(0, "b")), ("/b", link(0, "a")), ("/f", f(0))])
    with pytest.raises(LinkError, match="more than 40 symlinks"):
        tree.add("/a/x.so", f(1))
    with pytest.raises(LinkError, match=r"/f: not a directory \(file\)"):
        tree.add("/f/x.so", f(1))
    assert files_of(tree) == {"/f": 0}
