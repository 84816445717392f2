"""A missing companion: which imports a package's import needs (probe.environment.imports), and
which of them is a finding (analysis.verdicts.companions).

Expectations from the Python language reference, "The import system": module-level statements
run when the module is imported; an import inside a function, a class, a try whose handler
catches ImportError, an if or a with runs only when that code runs, so a package may go on
without it (an optional dependency); ``from . import x`` imports the package's submodule x.
PEP 508: a requirement whose marker is ``extra == 'cuda'`` is required only with that extra.
"""

from __future__ import annotations

from pathlib import Path

from archgap.analysis.verdicts.load import load_model
from archgap.probe.environment.imports import unresolved_imports, with_unresolved_imports
from archgap.probe.facts import Distribution, PythonEnvironment


def site(tmp_path: Path, files: dict[str, str], requires: tuple[str, ...] = ()) -> Distribution:
    """A site-packages with package ``pkg`` (files relative to it) and its dist-info."""
    sp = tmp_path / "site-packages"
    for name, text in files.items():
        path = sp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    info = sp / "pkg-1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    rows = [f"{n},," for n in files] + ["pkg/_C.cpython-311-x86_64-linux-gnu.so,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    so = str(sp / "pkg" / "_C.cpython-311-x86_64-linux-gnu.so")
    return Distribution("pkg", "1.0", str(info), (so,), requires)


def test_only_module_level_imports_of_the_modules_the_import_runs(tmp_path: Path) -> None:
    dist = site(tmp_path, {
        "pkg/__init__.py": "import os\nfrom . import core\nfrom .util import helper\n",
        "pkg/core.py": (
            "from __future__ import annotations\n"
            "import needed_a\n"
            "try:\n    import optional_b\nexcept ImportError:\n    optional_b = None\n"
            "if False:\n    import optional_c\n"
            "def f():\n    import lazy_d\n"
            "class K:\n    import lazy_e\n"
        ),
        "pkg/util.py": "from needed_f.sub import thing\n",
        "pkg/unused.py": "import never_g\n",  # not imported by the package's import
    })  # fmt: skip
    found = unresolved_imports(dist.dist_info, (str(tmp_path / "site-packages"),))
    assert found == (("needed_a", "pkg/core.py:2"), ("needed_f", "pkg/util.py:1"))


def test_what_site_packages_or_the_interpreter_provides_is_not_missing(tmp_path: Path) -> None:
    dist = site(tmp_path, {"pkg/__init__.py": "import json, there, ext\nimport there_too.x\n"})
    sp = tmp_path / "site-packages"
    (sp / "there").mkdir()
    (sp / "there_too.py").write_text("")
    (sp / "ext.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    assert unresolved_imports(dist.dist_info, (str(sp),)) == ()


def test_read_only_when_a_requirement_outside_an_extra_is_not_installed(tmp_path: Path) -> None:
    sp = (str(tmp_path / "site-packages"),)
    extra = site(tmp_path, {"pkg/__init__.py": "import cumm\n"}, ("cumm-cu120 ; extra == 'x'",))
    (kept,) = with_unresolved_imports([extra], sp)
    assert kept.unresolved_imports == ()
    needed = site(tmp_path, {"pkg/__init__.py": "import cumm\n"}, ("cumm-cu120 (<0.5,>=0.4.5)",))
    (read,) = with_unresolved_imports([needed], sp)
    assert read.unresolved_imports == (("cumm", "pkg/__init__.py:1"),)


def findings(*dists: Distribution) -> list[tuple[str, str]]:
    env = PythonEnvironment("python", "3.11.9", ("/sp",), dists, ())
    model = load_model(env, [], [], None, "", None)
    return [(f.package, f.fix) for f in model.findings if f.check == "companion"]


def dist(requires: tuple[str, ...], imports: tuple[tuple[str, str], ...]) -> Distribution:
    return Distribution("spconv-cu120", "2.3.6", "/sp/spconv_cu120-2.3.6.dist-info",
                        ("/sp/spconv/core_cc.so",), requires, imports)  # fmt: skip


def test_an_import_joined_to_the_requirement_of_its_name_is_a_finding() -> None:
    imports = (("cumm", "spconv/constants.py:19"),)
    assert findings(dist(("cumm-cu120 (<0.5.0,>=0.4.5)",), imports)) == [
        ("spconv-cu120", "pip install 'cumm-cu120<0.5.0,>=0.4.5'")
    ]
    # the requirement of an extra, or one whose marker is false on 3.11: not required here
    assert findings(dist(("cumm-cu120 ; extra == 'gpu'",), imports)) == []
    assert findings(dist(("cumm-cu120 ; python_version < '3.8'",), imports)) == []
    # an import no requirement names (cumm imports ccimport, its METADATA does not list it)
    assert findings(dist(("numpy",), imports)) == []
    # the companion installed (its module found elsewhere): the probe reports no import, and
    # an installed requirement is not missing
    cumm = Distribution("cumm-cu120", "0.4.11", "/sp/cumm.dist-info", ("/sp/cumm/x.so",))
    assert findings(dist(("cumm-cu120 (<0.5.0,>=0.4.5)",), imports), cumm) == []


def test_links_and_hostile_sources_are_not_read(tmp_path: Path) -> None:
    # the trust model: inspected files are data; a module that is a symbolic link out of the
    # environment is not followed, and source the parser cannot take is skipped, not raised
    outside = tmp_path / "outside.py"
    outside.write_text("import secret_module\n")
    dist = site(tmp_path, {
        "pkg/__init__.py": "from . import linked, deep, broken\nimport after\n",
        "pkg/deep.py": "x = " + "(" * 100_000 + ")" * 100_000 + "\n",
        "pkg/broken.py": "def (\n",
    })  # fmt: skip
    (tmp_path / "site-packages" / "pkg" / "linked.py").symlink_to(outside)
    found = unresolved_imports(dist.dist_info, (str(tmp_path / "site-packages"),))
    assert found == (("after", "pkg/__init__.py:2"),)


def test_a_line_of_a_string_that_reads_like_an_import_is_none(tmp_path: Path) -> None:
    dist = site(
        tmp_path, {"pkg/__init__.py": '"""Usage:\n\nimport in_a_docstring\n"""\nimport real\n'}
    )
    found = unresolved_imports(dist.dist_info, (str(tmp_path / "site-packages"),))
    assert found == (("real", "pkg/__init__.py:5"),)
