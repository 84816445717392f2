"""Knowledge as data: JSON files in this package, each entry with its source, loaded into
frozen dataclasses. Facts about GPUs, toolkits, drivers, packages and error signatures live
here, never in code."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any


@cache
def load_json(name: str) -> Any:
    """The parsed contents of ``archgap/kb/<name>`` (cached: the files never change at run time)."""
    return json.loads(resources.files(__package__).joinpath(name).read_text(encoding="utf-8"))
