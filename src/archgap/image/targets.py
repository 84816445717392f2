"""Which targets name a container image, and the source that reads each.

    oci:DIR[:TAG]               an OCI image layout (skopeo's ``oci:``)
    docker-archive:FILE[:REF]   a ``docker save`` / ``skopeo copy docker-archive:`` tarball
    docker://REF                a registry (``image/registry.py``)
    rootfs:DIR                  an unpacked root file system (``image/rootfs.py``)

A directory is taken for an OCI layout when it holds an ``oci-layout`` file, and for a root
file system when it holds ``etc/os-release`` or ``usr/lib/os-release`` (every distribution's
base image has one) and no ``.whl`` files.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from archgap.image import ARCHIVE_PREFIX, OCI_PREFIX, PREFIXES, REGISTRY_PREFIX, ROOTFS_PREFIX

if TYPE_CHECKING:  # the readers load only when an image is read: `kernels DIR` asks is_image
    from archgap.image.read import ImageContents
    from archgap.image.source import ImageSource, Platform

OS_RELEASE = ("etc/os-release", "usr/lib/os-release")


def is_image(target: str, rootfs: bool = True) -> bool:
    """Whether ``target`` names an image (a transport prefix, or a directory that is one; a
    root file system only with ``rootfs``: ``kernels DIR`` walks every file of a directory,
    ``kernels rootfs:DIR`` reads it as an image)."""
    if target.startswith(PREFIXES):
        return True
    if not os.path.isdir(target):
        return False
    if os.path.isfile(os.path.join(target, "oci-layout")):
        return True
    return rootfs and is_rootfs(target)


def is_rootfs(directory: str) -> bool:
    """A directory that is an unpacked root file system: it has an os-release file (not
    followed if it is a symlink out of the tree: lexists) and no wheels at its top."""
    if not any(os.path.lexists(os.path.join(directory, name)) for name in OS_RELEASE):
        return False
    return not any(name.endswith(".whl") for name in os.listdir(directory))


def image_source(target: str, tls_verify: bool = True) -> ImageSource:
    """The source for an image target; ``ImageError`` for a transport that cannot be read.
    ``tls_verify=False``: a registry may be reached without a verified certificate, or over
    plain HTTP (skopeo's ``--tls-verify=false``; loopback registries always may)."""
    from archgap.image.layout import DockerArchive, OciLayout
    from archgap.image.source import ImageError

    if target.startswith(OCI_PREFIX):
        return OciLayout(target[len(OCI_PREFIX) :])
    if target.startswith(ARCHIVE_PREFIX):
        return DockerArchive(target[len(ARCHIVE_PREFIX) :])
    if target.startswith(REGISTRY_PREFIX):
        from archgap.image.registry import RegistrySource

        return RegistrySource(target, tls_verify)
    if os.path.isfile(os.path.join(target, "oci-layout")):
        return OciLayout(target)
    raise ImageError(f"{target}: not an image")


def read_image_target(
    target: str, platform: str | None = None, deep: bool = True, tls_verify: bool = True
) -> ImageContents:
    """The image ``target`` names, for ``platform`` (``linux/arm64``, a wheel platform tag, or
    None: this machine's when the image is multi-platform). Never raises."""
    from archgap.image.read import read_image
    from archgap.image.source import ImageError, parse_platform

    try:
        wanted: Platform | None = parse_platform(platform) if platform else None
    except ValueError as exc:
        return _failed(target, str(exc))
    if target.startswith(ROOTFS_PREFIX) or (not target.startswith(PREFIXES) and is_rootfs(target)):
        from archgap.image.rootfs import read_rootfs

        return read_rootfs(target.removeprefix(ROOTFS_PREFIX), deep)
    try:
        source = image_source(target, tls_verify)
    except ImageError as exc:
        return _failed(target, str(exc))
    return read_image(source, wanted, deep)


def _failed(target: str, reason: str) -> ImageContents:
    from archgap.probe.facts import Problem

    found = ImageContents(target)
    found.problems.append(Problem(target, reason))
    return found
