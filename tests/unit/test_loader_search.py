"""Where ld.so finds a DT_NEEDED library that the environment ships (load model, check 3).

ld.so(8): a needed name is looked up in the needing object's DT_RUNPATH (or in the DT_RPATH of
it and of the objects that loaded it), LD_LIBRARY_PATH, /etc/ld.so.cache and the trusted
directories; an object already loaded satisfies a name by its soname. site-packages is none of
these. The layouts below are the real packages' (`readelf -d`):
- cuequivariance-ops-cu12 0.13.0: cuequivariance_ops/lib/libcue_ops.so, loaded by its
  __init__.py with ctypes.CDLL, has no RUNPATH and needs libnvrtc.so.12, which
  nvidia-cuda-nvrtc-cu12 installs in nvidia/cuda_nvrtc/lib: `import cuequivariance_ops` prints
  "libnvrtc.so.12: cannot open shared object file".
- torch: torch/_C.cpython-311-x86_64-linux-gnu.so (RUNPATH $ORIGIN/lib) needs
  libtorch_cuda.so, whose RUNPATH names $ORIGIN/../../nvidia/cuda_runtime/lib, where
  libcudart.so.12 is: an extension that needs libcudart.so.12 with no RUNPATH finds it loaded.
- faiss-gpu-cu12 1.14.1.post1: faiss/_swigfaiss.so (RPATH $ORIGIN/../faiss_gpu_cu12.libs) needs
  libfaiss-6b43fd57.so there, which needs libopenblas-r0-f650aae0.3.3.so beside it and has no
  RUNPATH of its own.
"""

from __future__ import annotations

from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.analysis.verdicts.load import load_model
from archgap.probe.facts import (
    BinaryFacts,
    Distribution,
    KernelEntry,
    LoaderFacts,
    PythonEnvironment,
)

SP = "/venv/lib/python3.11/site-packages"
SASS = KernelEntry("sass", 90, "", None, "none", 10, 10, ".nv_fatbin", 0, False, True)


def elf(
    path: str, needed: tuple[str, ...], runpath: tuple[str, ...] = (), cuda: bool = False
) -> BinaryFacts:
    return BinaryFacts(
        f"{SP}/{path}", 1, "elf", (SASS,) if cuda else (), False, needed=needed, runpath=runpath
    )


def missing(*binaries: BinaryFacts) -> set[str]:
    """The needed names check 3 reports as not found, with the target's loader read."""
    dist = Distribution("pkg", "1.0", f"{SP}/pkg-1.0.dist-info", tuple(b.path for b in binaries))
    env = PythonEnvironment("python", "3.11", (SP,), (dist,), ())
    loader = LoaderFacts(("libc.so.6",), ("/etc/ld.so.cache",))
    model = load_model(env, list(binaries), [resolve_gpu("H100")], None, "", loader)
    return {
        name
        for f in model.findings
        if f.check == "needed-library" and f.status == "fails"
        for name in f.chain[0].split(" needs ", 1)[1].split(" (")[0].split(", ")
    }


NVRTC = elf("nvidia/cuda_nvrtc/lib/libnvrtc.so.12", ("libc.so.6",), ("$ORIGIN",))


def test_a_library_elsewhere_in_site_packages_is_not_found() -> None:
    cue = elf("cuequivariance_ops/lib/libcue_ops.so", ("libnvrtc.so.12", "libc.so.6"), cuda=True)
    assert missing(cue, NVRTC) == {"libnvrtc.so.12"}


def test_a_library_its_own_runpath_names_is_found() -> None:
    nvrtc_dir = "$ORIGIN/../../nvidia/cuda_nvrtc/lib"
    ops = elf("ops/lib/libops.so", ("libnvrtc.so.12",), (nvrtc_dir,), cuda=True)
    assert missing(ops, NVRTC) == set()


def test_a_library_torch_has_loaded_is_found_by_its_soname() -> None:
    cudart = elf("nvidia/cuda_runtime/lib/libcudart.so.12", ("libc.so.6",))
    torch_c = elf(
        "torch/_C.cpython-311-x86_64-linux-gnu.so", ("libtorch_cuda.so",), ("$ORIGIN/lib",)
    )
    torch_cuda = elf(
        "torch/lib/libtorch_cuda.so", ("libcudart.so.12",),
        ("$ORIGIN/../../nvidia/cuda_runtime/lib",), True,
    )  # fmt: skip
    ext = elf("ext/_kernels.cpython-311-x86_64-linux-gnu.so", ("libcudart.so.12",), cuda=True)
    assert missing(cudart, torch_c, torch_cuda, ext) == set()
    assert missing(cudart, ext) == {"libcudart.so.12"}  # without torch nothing loads it


def test_a_vendored_library_beside_one_loaded_through_an_rpath_is_found() -> None:
    libs = "faiss_gpu_cu12.libs"
    swig = elf("faiss/_swigfaiss.so", ("libfaiss-6b43fd57.so",), (f"$ORIGIN/../{libs}",))
    faiss = elf(f"{libs}/libfaiss-6b43fd57.so", ("libopenblas-r0-f650aae0.3.3.so",), cuda=True)
    blas = elf("faiss_gpu_cu12.libs/libopenblas-r0-f650aae0.3.3.so", ("libc.so.6",))
    assert missing(swig, faiss, blas) == set()
    assert missing(faiss, blas) == {"libopenblas-r0-f650aae0.3.3.so"}  # nothing loads faiss so


def test_a_library_its_package_preloads_by_path_is_found() -> None:
    """pycolmap-cuda12 4.2.1: pycolmap/_core.cpython-311-x86_64-linux-gnu.so needs
    libcudart.so.12 with no RUNPATH; pycolmap/__init__.py passes nvidia.cuda_runtime's
    ``libcudart.so.*[0-9]`` to ctypes.CDLL before ``from . import _core`` (`import pycolmap`
    works)."""
    cudart = elf("nvidia/cuda_runtime/lib/libcudart.so.12", ("libc.so.6",))
    core = elf("pycolmap/_core.cpython-311-x86_64-linux-gnu.so", ("libcudart.so.12",), cuda=True)
    dist = Distribution(
        "pycolmap-cuda12", "4.2.1", f"{SP}/pycolmap_cuda12-4.2.1.dist-info",
        (core.path,), preloads=("libcudart.so.*[0-9]", "libcurand.so.*[0-9]"),
    )  # fmt: skip
    nvidia = Distribution("nvidia-cuda-runtime-cu12", "12.9.79", f"{SP}/x", (cudart.path,))
    env = PythonEnvironment("python", "3.11", (SP,), (dist, nvidia), ())
    loader = LoaderFacts(("libc.so.6",), ("/etc/ld.so.cache",))
    model = load_model(env, [cudart, core], [resolve_gpu("H100")], None, "", loader)
    assert not [f for f in model.findings if f.check == "needed-library"]
    unloaded = Distribution(dist.name, dist.version, dist.dist_info, (core.path,))
    env = PythonEnvironment("python", "3.11", (SP,), (unloaded, nvidia), ())
    model = load_model(env, [cudart, core], [resolve_gpu("H100")], None, "", loader)
    assert [f.status for f in model.findings if f.check == "needed-library"] == ["fails"]
