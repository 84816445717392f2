"""What an image says about itself: its platform (from its config) and where its Python is.

Plain frozen dataclasses, shared by the reader (``read.py``) and the analysis and report (the
image's CPU goes into the host-platform finding).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PythonSite:
    """One site-packages directory of the image."""

    path: str  # the image path: "/opt/venv/lib/python3.12/site-packages"
    python_version: str  # "3.12" from the directory's name ("3" for Debian's dist-packages)
    kind: str  # "venv" (pyvenv.cfg next to lib/), "conda" (conda-meta), "system"


@dataclass(frozen=True)
class ImageFacts:
    """One image (or unpacked root file system) judged."""

    label: str  # "oci:/srv/layout:v1", "docker-archive:app.tar", "/srv/rootfs"
    platform: str  # "linux/arm64" as the config declares it; "" for a root file system
    architecture: str  # "arm64" (OCI spelling); ""
    os: str  # "linux"; ""
    elf_machine: str | None  # "aarch64": what its native files must be to run there
    manifest_digest: str  # the manifest's digest ("" where the source has none)
    layers: int  # 0 for a root file system
    sites: tuple[PythonSite, ...]
