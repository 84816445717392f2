"""Container images judged before they are deployed, without running or extracting them.

An image comes from an ``ImageSource`` (``source.py``: an OCI layout, a ``docker save`` tarball,
a registry): a manifest for one platform and its layer blobs as streams. ``read.py`` applies the
layers in order with their whiteouts (a pass over the tar headers gives the final file set), then
reads only the files it needs, each from the one layer that provides it: the Python environments'
``.dist-info`` METADATA and RECORD, and the native files, through the same reader as wheels and
installed files. The result has the shape of ``probe.archive.WheelContents``, so the analysis is
the installed environment's.
"""
