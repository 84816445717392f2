"""The credential helpers containers tools ask: ``credential-helpers`` of registries.conf.

containers-registries.conf(5): a top-level ``credential-helpers = ["containers-auth.json",
"pass"]`` lists the helpers tried in order; ``containers-auth.json`` is the reserved name for the
auth files (containers-auth.json(5): ``registry_auth.auth_files``), any other NAME is
``docker-credential-NAME``; with none set, ``["containers-auth.json"]``. The files, as
containers/image ``pkg/sysregistriesv2`` reads them: ``$HOME/.config/containers/registries.conf``
if it exists, with only the drop-ins of ``$HOME/.config/containers/registries.conf.d``; else
``/etc/containers/registries.conf``, the drop-ins of ``/etc/containers/registries.conf.d``, then
those of the user's directory. Drop-ins are the ``*.conf`` files of a directory in name order;
a later file that sets ``credential-helpers`` replaces the earlier setting (an empty list means
the default). A file that cannot be read or parsed is a note, never an exception.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

AUTH_FILES = "containers-auth.json"  # the reserved name: the auth files themselves
SYSTEM_DIR = "/etc/containers"
_USER_DIR = (".config", "containers")


@dataclass(frozen=True)
class HelperSetting:
    """The helpers to try, in order; the file that set them ("" for the default); notes."""

    helpers: tuple[str, ...]
    origin: str = ""
    notes: tuple[str, ...] = ()


def config_files(env: Mapping[str, str], system_dir: str | None = None) -> list[str]:
    """The registries.conf files read, in order (later ones override)."""
    home = env.get("HOME") or os.path.expanduser("~")
    user = os.path.join(home, *_USER_DIR)
    user_main = os.path.join(user, "registries.conf")
    if os.path.exists(user_main):
        return [user_main, *_drop_ins(user_main + ".d")]
    system = os.path.join(system_dir or SYSTEM_DIR, "registries.conf")
    return [system, *_drop_ins(system + ".d"), *_drop_ins(user_main + ".d")]


def _drop_ins(directory: str) -> list[str]:
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    paths = [os.path.join(directory, n) for n in names if n.endswith(".conf")]
    return [p for p in paths if not os.path.isdir(p)]


def credential_helpers(env: Mapping[str, str], system_dir: str | None = None) -> HelperSetting:
    """The ``credential-helpers`` the registries.conf files set, or the default."""
    helpers: tuple[str, ...] = ()
    origin = ""
    notes: list[str] = []
    for path in config_files(env, system_dir):
        doc = _load(path, notes)
        value = doc.get("credential-helpers") if doc is not None else None
        if value is None:
            continue
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            notes.append(f"{path}: credential-helpers is not a list of helper names")
            continue
        helpers, origin = tuple(value), path
    if not helpers:
        return HelperSetting((AUTH_FILES,), "", tuple(notes))
    return HelperSetting(helpers, origin, tuple(notes))


def _load(path: str, notes: list[str]) -> dict[str, Any] | None:
    """The TOML document at ``path``; None (and a note, unless it does not exist)."""
    # tomllib from Python 3.11; its backport, tomli, on 3.10 (a dependency there).
    tomllib = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
    try:
        with open(path, "rb") as handle:
            doc: dict[str, Any] = tomllib.load(handle)
    except FileNotFoundError:
        return None
    except OSError as exc:
        notes.append(f"{path}: cannot read: {exc.strerror or exc}")
        return None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        notes.append(f"{path}: not valid TOML: {exc}")
        return None
    return doc
