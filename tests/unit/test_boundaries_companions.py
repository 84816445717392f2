"""Boundaries of the companions check (analysis/verdicts/companions.py). Expectations:
- PEP 440, "Handling of pre-releases": pre-releases are excluded from a specifier's matches
  *unless they are already present on the system*; pip check accepts an installed pre-release
  (pip/_internal/operations/check.py: ``req.specifier.contains(version, prereleases=True)``).
- The check is about native libraries built to load together: a companion that ships no native
  file, out of range, is pip check's business, not a link that breaks loading.
- An import is joined to the requirement of its distribution by name: ``cumm`` to ``cumm`` or
  ``cumm-cu120`` (a hint: the distribution's name before a variant suffix), never to ``cummx``.
"""

from __future__ import annotations

from archgap.analysis.verdicts.companions import companions
from archgap.probe.facts import Distribution, PythonEnvironment

SO = "/sp/{}/_C.so"


def findings(*dists: Distribution) -> list[tuple[str, str]]:
    env = PythonEnvironment("python", "3.11", ("/sp",), dists, ())
    blocked: dict[tuple[str, str], str] = {}
    return [(f.package, f.cause) for f in companions(env, blocked, False)]


def dist(name: str, version: str, *requires: str, native: bool = True) -> Distribution:
    files = (SO.format(name),) if native else ()
    return Distribution(name, version, f"/sp/{name}-{version}.dist-info", files, requires)


def test_an_installed_pre_release_inside_the_range_is_in_range() -> None:
    plugin = dist("jax-cuda12-plugin", "0.5.0", "jax-cuda12-pjrt>=0.5.0rc0")
    assert findings(plugin, dist("jax-cuda12-pjrt", "0.5.0rc1")) == []
    # and one below the range is out of it
    out = findings(plugin, dist("jax-cuda12-pjrt", "0.4.38"))
    assert out and out[0][0] == "jax-cuda12-plugin"
    assert "requires jax-cuda12-pjrt>=0.5.0rc0, and jax-cuda12-pjrt 0.4.38" in out[0][1]


def test_a_companion_without_native_files_out_of_range_is_no_finding() -> None:
    plugin = dist("jax-cuda12-plugin", "0.4.38", "jax-cuda12-pjrt==0.4.38")
    assert findings(plugin, dist("jax-cuda12-pjrt", "0.4.36", native=False)) == []
    assert len(findings(plugin, dist("jax-cuda12-pjrt", "0.4.36"))) == 1


def test_an_import_is_joined_to_its_own_distribution_only() -> None:
    needs = ("cumm", "spconv/core.py:3")
    other = Distribution(
        "spconv-cu120", "2.3.6", "/sp/spconv.dist-info", (SO.format("spconv"),),
        ("cummx>=0.4.5",), (needs,),
    )  # fmt: skip
    assert findings(other) == []  # cummx is not cumm's distribution
    own = Distribution(
        "spconv-cu120", "2.3.6", "/sp/spconv.dist-info", (SO.format("spconv"),),
        ("cumm-cu120<0.5.0,>=0.4.5",), (needs,),
    )  # fmt: skip
    found = findings(own)
    assert found and "No module named 'cumm'" in found[0][1]
