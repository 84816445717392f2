"""What a package's own import loads by path (probe.environment.preloads), read as text.

The sources below are the packages' own lines: pycolmap-cuda12 4.2.1's pycolmap/__init__.py
(``_preload_cuda_deps``: a dict of nvidia modules to library globs, each file passed to
``ctypes.CDLL``), and cuequivariance-ops-cu12 0.13.0's, which loads only its own
``lib/libcue_ops.so`` by a joined path.
"""

from __future__ import annotations

from pathlib import Path

from archgap.probe.environment.preloads import package_inits, preloaded

PYCOLMAP = """import ctypes
def _preload_cuda_lib(module_name: str, lib_name: str):
    for lib_path in sorted(lib_dir.glob(lib_name)):
        ctypes.CDLL(str(lib_path))
def _preload_cuda_deps():
    cuda_libs = {
        "nvidia.cuda_runtime": "libcudart.so.*[0-9]",
        "nvidia.curand": "libcurand.so.*[0-9]",
    }
"""
CUE = """import ctypes
def load_library():
    ctypes.CDLL(os.path.join(root_dir(), "lib/libcue_ops.so"), mode=PREFERRED_LOAD_FLAG)
"""


def package(tmp_path: Path, name: str, init: str) -> tuple[str, ...]:
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text(init)
    return preloaded(str(tmp_path), package_inits([f"{name}/__init__.py", f"{name}/_core.so"]))


def test_the_globs_a_package_loads_with_ctypes(tmp_path: Path) -> None:
    found = package(tmp_path, "pycolmap", PYCOLMAP)
    assert found == ("libcudart.so.*[0-9]", "libcurand.so.*[0-9]")


def test_a_path_of_its_own_names_no_library_to_preload(tmp_path: Path) -> None:
    assert package(tmp_path, "cuequivariance_ops", CUE) == ()


def test_names_without_a_ctypes_load_are_not_preloads(tmp_path: Path) -> None:
    text = 'MESSAGE = "install libcudart.so.12"\n'
    assert package(tmp_path, "pkg", text) == ()


def test_only_top_level_package_inits_are_read() -> None:
    names = ["pkg/sub/__init__.py", "pkg/__init__.py", "pkg-1.0.dist-info/RECORD", "__init__.py"]
    assert package_inits(names) == ["pkg/__init__.py"]
