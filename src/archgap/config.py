"""Defaults from a config file, so a CI gate is one word (`archgap scan`):

    [tool.archgap]            # in the project's pyproject.toml (the nearest one up from the cwd)
    gpus = ["RTX PRO 6000", "H100"]
    require = ["H100"]
    strict = true

or the same keys at the top level of ~/.config/archgap/config.toml ($XDG_CONFIG_HOME). The
project's file wins over the user's; an option given on the command line wins over both.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from archgap.errors import UsageError

KEYS = {"gpus": "gpu", "require": "require", "strict": "strict"}  # config key -> option attribute
# The commands whose --gpu/--require/--strict mean "judge against these GPUs" (explain's --gpu is
# the crashed host's, recipe's the build's, probe's --require a presence check: not these).
COMMANDS = ("scan", "kernels", "fleet")


def _load_toml(path: str) -> dict[str, Any]:
    import importlib

    # tomllib from Python 3.11; its backport, tomli, on 3.10 (a dependency there).
    tomllib = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
    try:
        with open(path, "rb") as handle:
            data: dict[str, Any] = tomllib.load(handle)
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    return data


def _project_table(path: str) -> Any:
    """The [tool.archgap] table of a pyproject.toml, or None. A file that never names archgap
    has none and is not parsed (parsing TOML is a noticeable part of a fast command's time)."""
    try:
        with open(path, "rb") as handle:
            if b"archgap" not in handle.read():
                return None
    except OSError:
        pass  # _load_toml says why it cannot be read
    return _load_toml(path).get("tool", {}).get("archgap")


def find_config(
    cwd: str | None = None, environ: dict[str, str] | None = None
) -> tuple[str, dict[str, Any]] | None:
    """(file, settings): the nearest pyproject.toml with a [tool.archgap] table, else the user's
    config file; None when there is neither. (Paths as strings: pathlib is not imported by a
    command that has no config.)"""
    env = dict(os.environ) if environ is None else environ
    here = os.path.realpath(cwd if cwd is not None else os.getcwd())
    while True:
        candidate = os.path.join(here, "pyproject.toml")
        if os.path.isfile(candidate):
            table = _project_table(candidate)
            if isinstance(table, dict):
                return candidate, table
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME", "~"), ".config")
    user = os.path.join(base, "archgap", "config.toml")
    if os.path.isfile(user):
        return user, _load_toml(user)
    return None


def _checked(path: str, key: str, value: Any) -> Any:
    if key == "strict":
        if not isinstance(value, bool):
            raise UsageError(f"{path}: archgap setting {key!r} must be true or false")
        return value
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{path}: archgap setting {key!r} must be a list of GPU names")
    return value


def settings(command: str) -> tuple[str, dict[str, Any]]:
    """The file that applies to ``command`` ("" when none) and its settings by option attribute
    (``gpus`` -> ``gpu``). Unknown keys are an error (a typo would silently do nothing)."""
    found = find_config() if command in COMMANDS else None
    if found is None:
        return "", {}
    path, table = found
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        known = ", ".join(KEYS)
        raise UsageError(
            f"{path}: unknown archgap setting(s) {', '.join(unknown)} (known: {known})"
        )
    return path, {KEYS[key]: _checked(path, key, value) for key, value in table.items()}
