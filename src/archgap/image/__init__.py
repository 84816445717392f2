"""Container images judged before they are deployed, without running or extracting them.

An image comes from an ``ImageSource`` (``source.py``: an OCI layout, a ``docker save`` tarball,
a registry): a manifest for one platform and its layer blobs as streams. ``read.py`` applies the
layers in order with their whiteouts and symlinked directories (one pass, each layer decompressed
once), reading on the way the files it needs: the Python environments' ``.dist-info`` METADATA
and RECORD, and the native files, through the same reader as wheels and installed files; each
counts from the one layer that provides it in the final image. The result has the shape of
``archives.wheel.WheelContents``, so the analysis is the installed environment's.
"""

# How a target names each transport (targets.py), and a source its image's label. Here, not
# with the sources: `kernels DIR` asks targets.is_image and needs none of them.
OCI_PREFIX = "oci:"
ARCHIVE_PREFIX = "docker-archive:"
REGISTRY_PREFIX = "docker://"
ROOTFS_PREFIX = "rootfs:"
PREFIXES = (OCI_PREFIX, ARCHIVE_PREFIX, REGISTRY_PREFIX, ROOTFS_PREFIX)
