"""`kernels --require claimed` on PEP 817 variant wheels: the `nvidia :: sm_arch` values a wheel's
`*.dist-info/variant.json` declares are checked against the kernels inside it.

Few variant wheels exist on a public index yet (PEP 817 is a draft; the wheelnext variant index
is not PyPI), so the wheels here are built to the PEP's text: the extended file name
`{name}-{version}-{python}-{abi}-{platform}-{variant label}.whl`, and a variant.json with the
`$schema`, `providers` and `default-priorities` of the PEP's example and a `variants` object
"listing exactly one variant - the variant provided by the wheel" ({label: {namespace:
{feature: [values]}}}). Each sm_arch value is "compatible with CMAKE flag 90_real" (the NVIDIA
variant provider's words): CMake's `90-real` is SASS sm_90, `120-virtual` PTX compute_120.

The kernels are the fixture libraries nvcc built (tests/fixtures/cuda/build.sh; what each holds
is its nvcc line, and what cuobjdump lists):
- libdebug.so: SASS sm_80 only
- libmix.so: SASS sm_75, sm_90, sm_90a, sm_100a, sm_103f, sm_120, sm_120a; PTX compute_75,
  compute_100f, compute_120a
NVIDIA's rules: SASS sm_XY runs on X.Z with Z >= Y (same major); PTX compute_XY is JIT-compiled
for compute capability >= X.Y.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from archgap.cli import main
from archgap.report.jsondoc import schema
from tests.helpers import CUDA_BIN

SCHEMA_URL = "https://variants-schema.wheelnext.dev/v0.0.3.json"  # PEP 817's example
PLUGIN = "nvidia_variant_provider.plugin:NvidiaVariantPlugin"


def variant_wheel(
    folder: Path, name: str, label: str, lib: str | None, sm_arch: list[str] | None
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-1.0-py3-none-manylinux_2_17_x86_64-{label}.whl"
    info = f"{name}-1.0.dist-info"
    features: dict[str, Any] = (
        {"nvidia": {"sm_arch": sm_arch, "cuda_version_lower_bound": ["12.8"]}} if sm_arch else {}
    )
    metadata = {
        "$schema": SCHEMA_URL,
        "default-priorities": {"namespace": ["nvidia"]},
        "providers": {"nvidia": {"requires": ["nvidia-variant-provider>=0.0.1,<1.0.0"],
                                 "plugin-api": PLUGIN}},
        "variants": {label: features},
    }  # fmt: skip
    members = (
        {f"{name}/{lib}": (CUDA_BIN / lib).read_bytes()} if lib else {f"{name}/__init__.py": b""}
    )
    members[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode()
    members[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"
    members[f"{info}/variant.json"] = json.dumps(metadata, indent=2).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for member, data in members.items():
            zf.writestr(member, data)
        zf.writestr(f"{info}/RECORD", "".join(f"{m},,\n" for m in [*members, f"{info}/RECORD"]))
    return path


def gate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["kernels", "--json", *args, "--require", "claimed"])
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, schema("kernels"))
    return code, doc["require"]


def failures(require: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(f["claim"], f["path"].rsplit("/", 1)[-1], f["verdict"]) for f in require["failures"]]


@pytest.fixture(autouse=True)
def no_other_claims(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Only the wheels claim: no build variables, no CMake files, no [tool.archgap] around."""
    for name in ("TORCH_CUDA_ARCH_LIST", "CMAKE_CUDA_ARCHITECTURES", "CUDAARCHS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


def test_a_declared_arch_the_kernels_lack_fails(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Declared 80_real and 90_real; libdebug.so has sm_80 SASS only: sm_90 (another major)
    fails, named with the variant; 80 is kept."""
    wheel = variant_wheel(tmp_path / "w", "kbad", "cu130", "libdebug.so", ["80_real", "90_real"])
    code, require = gate(capsys, str(wheel))
    assert code == 1
    assert failures(require) == [("sm_90 (variant cu130)", "libdebug.so", "none")]
    assert (
        "variant cu130 (variant.json: nvidia :: sm_arch :: 80_real, 90_real)"
        in (require["claimed_from"])
    )


def test_a_matching_variant_passes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """libmix.so: sm_75, sm_90, sm_120 SASS keep 75_real, 90_real, 120_real; its compute_75 PTX
    JIT-compiles for 12.0 and keeps 120_virtual."""
    values = ["75_real", "90_real", "120_real", "120_virtual"]
    wheel = variant_wheel(tmp_path / "w", "kgood", "cu130", "libmix.so", values)
    code, require = gate(capsys, str(wheel))
    assert (code, failures(require)) == (0, [])
    assert require["passed"] is True


def test_a_virtual_claim_needs_ptx(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """80_virtual promises PTX for 8.0: libdebug.so has none (its sm_80 SASS does not count)."""
    wheel = variant_wheel(tmp_path / "w", "kptx", "cu130", "libdebug.so", ["80_virtual"])
    code, require = gate(capsys, str(wheel))
    assert code == 1
    assert failures(require) == [("compute_80 (variant cu130)", "libdebug.so", "none")]


def test_a_variant_with_no_device_code_fails(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A wheel that declares 90_real and ships no kernel at all, beside a good one in dist/:
    the empty one fails, named by its file; the other passes."""
    dist = tmp_path / "dist"
    variant_wheel(dist, "kgood", "cu130", "libmix.so", ["90_real"])
    empty = variant_wheel(dist, "kempty", "cu130", None, ["90_real"])
    code, require = gate(capsys, str(dist))
    assert code == 1
    assert failures(require) == [("sm_90 (variant cu130)", empty.name, "none")]


def test_the_variant_adds_to_the_build_claims(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TORCH_CUDA_ARCH_LIST=8.0 claims sm_80 for every library (kept by libdebug.so); the
    wheel's own 90_real is still checked."""
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0")
    wheel = variant_wheel(tmp_path / "w", "kbad", "cu130", "libdebug.so", ["90_real"])
    code, require = gate(capsys, str(wheel))
    assert code == 1
    assert failures(require) == [("sm_90 (variant cu130)", "libdebug.so", "none")]
    assert require["claimed_from"].startswith("TORCH_CUDA_ARCH_LIST (environment): 8.0; ")


def test_a_null_variant_claims_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The null variant (no properties) declares no architecture: with nothing else claimed,
    the usage error says so (exit 2)."""
    wheel = variant_wheel(tmp_path / "w", "knull", "null", "libdebug.so", None)
    code = main(["kernels", str(wheel), "--require", "claimed"])
    captured = capsys.readouterr()
    assert code == 2
    assert "no claim found" in captured.err and "Traceback" not in captured.err


def test_a_broken_declaration_is_one_error_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    wheel = variant_wheel(tmp_path / "w", "kodd", "cu130", "libdebug.so", ["sm_90"])
    code = main(["kernels", str(wheel), "--require", "claimed"])
    err = capsys.readouterr().err
    assert code == 2
    assert "nvidia :: sm_arch :: 'sm_90' is not an architecture" in err
    assert "Traceback" not in err
