"""archgap.config: which file's [tool.archgap] table applies, found walking up from a directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from archgap.config import find_config
from archgap.errors import UsageError


def test_a_pyproject_that_never_names_archgap_is_passed_over_unparsed(tmp_path: Path) -> None:
    # The inner file is not even valid TOML: it is not read as TOML, and the search goes on up
    # to the project that has the table (as it would past any file without the table).
    (tmp_path / "pyproject.toml").write_text('[tool.archgap]\ngpus = ["H100"]\n')
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "pyproject.toml").write_text("[project\nname = 'broken'\n")
    found = find_config(str(inner), environ={"HOME": str(tmp_path / "home")})
    assert found == (str(tmp_path / "pyproject.toml"), {"gpus": ["H100"]})


def test_a_broken_pyproject_that_configures_archgap_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.archgap\ngpus = ['H100']\n")
    with pytest.raises(UsageError, match="not valid TOML"):
        find_config(str(tmp_path), environ={"HOME": str(tmp_path / "home")})
