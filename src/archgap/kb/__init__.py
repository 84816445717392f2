"""Knowledge as data: JSON files in this package, each entry with its source, loaded into
frozen dataclasses. Facts about GPUs, toolkits, drivers, packages and error signatures live
here, never in code."""

from __future__ import annotations

import json
import os
from functools import cache
from typing import Any


@cache
def load_json(name: str) -> Any:
    """The parsed contents of ``archgap/kb/<name>`` (cached: the files never change at run time).
    Read next to this module; through importlib.resources (whose import costs a fast command
    a few ms) only where the package is not plain files (a zip)."""
    try:
        with open(os.path.join(os.path.dirname(__file__), name), encoding="utf-8") as file:
            return json.load(file)
    except FileNotFoundError:
        from importlib import resources

        return json.loads(resources.files(__package__).joinpath(name).read_text(encoding="utf-8"))
