"""The probe's summary of a file's entries (probe/summary.py): fewer rows, the same verdicts.

Expectations from tests/fixtures/cuda/build.sh: nvcc 13 device-links every shared library, which
adds a container with one cubin per SASS target, so each SASS target of libmix.so is there twice
(docs/reference/fatbin-format.md section 1) and its summary has one row of count 2 for each.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict

import pytest

from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.analysis.verdicts.verdicts import library_verdict
from archgap.codec import decode
from archgap.probe.binary.binfiles import walk_binaries
from archgap.probe.binary.fatbin import read_binary
from archgap.probe.binary.summary import Summary, binary_json, summarized
from archgap.probe.collect import collect
from archgap.probe.environment.system import System
from archgap.probe.facts import BinaryFacts, ProbeResponse
from tests.helpers import CUDA_BIN, need_data

# Real NVIDIA wheels installed under tests/.data (the test command's setup).
REAL_VENVS = ("nvidia-cuda-cupti-13.0.85", "nvidia-curand-10.4.0.35", "nvidia-cuda-runtime-13.0.96")
GPUS = ("7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1", "3.7")


def test_device_linked_sass_targets_become_one_row_of_two() -> None:
    full = read_binary(str(CUDA_BIN / "libmix.so"))
    summary = summarized(full)
    sass = {e.target: e.count for e in summary.entries if e.kind == "sass"}
    assert sass == {
        "sm_75": 2, "sm_90": 2, "sm_90a": 2, "sm_100a": 2, "sm_103f": 2, "sm_120": 2, "sm_120a": 2
    }  # fmt: skip
    assert sum(e.count for e in summary.entries) == len(full.entries)
    assert sum(e.stored_size for e in summary.entries) == sum(e.stored_size for e in full.entries)
    first: dict[tuple[str, int, str], int] = {}
    for e in full.entries:
        first.setdefault((e.kind, e.arch, e.variant), e.offset)
    assert all(e.offset == first[(e.kind, e.arch, e.variant)] for e in summary.entries)


def test_summary_gives_the_same_verdicts_on_every_fixture() -> None:
    files = list(walk_binaries([str(CUDA_BIN)], deep=True))
    merged = 0
    for facts in files:
        summary = summarized(facts)
        merged += len(facts.entries) - len(summary.entries)
        # The analysis side sees the summary through JSON, as a remote probe sends it.
        wire = decode(BinaryFacts, json.loads(json.dumps(binary_json(facts, False))))
        assert wire == summary
        for gpu in GPUS:
            target = resolve_gpu(gpu)
            for isa in (None, (8, 0), (9, 0)):
                assert library_verdict(wire, target, isa) == library_verdict(facts, target, isa)
    # the summary did merge entries: every device-linked .so has each target twice
    assert merged > 10


def test_rows_merged_as_entries_are_found_are_the_summary_of_every_entry() -> None:
    # A summarizing reader merges each entry into its row as it finds it (Summary through
    # Reader.found), with no object per entry: the rows, their order, counts, sizes and first
    # offsets must be summarized()'s of every entry. On the fixtures (device-linked targets
    # twice, compressed stubs beside kernels, archives, loose cubins and fatbins) and on real
    # NVIDIA libraries: CUPTI's static archives and .rodata containers, cuRAND, the runtime.
    from archgap.probe.binary.binfiles import discover

    trees = [CUDA_BIN, *need_data(*(f"venv-{name}" for name in REAL_VENVS))]
    paths = [path for path, ready in discover([str(t) for t in trees]) if ready is None]
    merged = {False: 0, True: 0}
    for path in paths:
        for deep in (False, True):
            every = read_binary(path, deep)
            rows = read_binary(path, deep, Summary)
            assert rows == summarized(every), path
            merged[deep] += len(every.entries) - len(rows.entries)
    assert len(paths) > 30 and merged[False] > 10 and merged[True] > merged[False]


@pytest.mark.parametrize("name", ["libcomp_tiny.so", "libtiny_lz4.so"])
def test_a_small_compressed_kernel_merged_with_its_stub_is_a_kernel(name: str) -> None:
    # libcomp_tiny.so / libtiny_lz4.so (build.sh): cuobjdump --list-elf lists two sm_75
    # cubins, zstd- / LZ4-compressed; cuobjdump -elf shows the device link's stub without a
    # .text section and the empty kernel's with .text._Z13archgap_emptyv. sm_75 runs on 7.5:
    # the summary row of both (one holds a kernel, or may) must not say "no kernels".
    facts = read_binary(str(CUDA_BIN / name))
    assert len(facts.entries) == 2
    target = resolve_gpu("7.5")
    expected = library_verdict(facts, target, None)
    assert expected.verdict == "native"
    request = {"binaries": {"paths": [facts.path], "deep": True, "detail": False}}
    (sent,) = collect(request, System.local())["sections"]["binaries"]
    wire = decode(BinaryFacts, sent)
    assert len(wire.entries) == 1
    assert library_verdict(wire, target, None) == expected
    assert library_verdict(summarized(facts), target, None) == expected


def test_detail_is_asdict_with_count_one() -> None:
    facts = read_binary(str(CUDA_BIN / "libmix.so"), deep=True)
    assert json.dumps(binary_json(facts)) == json.dumps(asdict(facts))
    assert all(e["count"] == 1 for e in binary_json(facts)["entries"])


def test_probe_request_without_detail_sends_the_summary() -> None:
    from archgap.request import binaries_request

    paths = [str(CUDA_BIN / "libmix.so"), str(CUDA_BIN / "libcomp_all.so")]
    system = System.local()
    detail = collect(binaries_request(paths, True, True), system)
    small = collect(binaries_request(paths, True, False), system)
    found = zip(detail["sections"]["binaries"], small["sections"]["binaries"], strict=True)
    rows = []
    for full, summary in found:
        counted: Counter[str] = Counter()
        for e in summary["entries"]:
            counted[f"{e['kind']} {e['arch']}{e['variant']}"] += e["count"]
        assert counted == Counter(f"{e['kind']} {e['arch']}{e['variant']}" for e in full["entries"])
        rows.append((len(summary["entries"]), len(full["entries"])))
    # libmix.so: its 7 SASS targets are there twice, uncompressed (module doc): one row each.
    # libcomp_all.so: each of its 2 SASS targets' compressed stub and kernel: one row each
    # (size does not keep them apart); its one PTX entry stays a row.
    assert rows[0][0] == rows[0][1] - 7
    assert rows[1] == (3, 5)


def test_fleet_judges_an_old_detailed_document_as_the_summary() -> None:
    # A document of today's probe (every entry, no "count") and the summary of the same files.
    from archgap.analysis.fleet import summarise_host

    paths = [str(CUDA_BIN)]
    system = System.local()
    old = collect({"binaries": {"paths": paths, "deep": True}}, system)
    for binary in old["sections"]["binaries"]:
        for entry in binary["entries"]:
            del entry["count"]
    new = collect({"binaries": {"paths": paths, "deep": True, "detail": False}}, system)
    old_host = summarise_host(
        "h", decode(ProbeResponse, json.loads(json.dumps(old))), ["8.6", "12.0"]
    )
    new_host = summarise_host(
        "h", decode(ProbeResponse, json.loads(json.dumps(new))), ["8.6", "12.0"]
    )
    assert old_host.coverage and old_host.coverage == new_host.coverage
    assert old_host.fingerprint == new_host.fingerprint


def read_telling(deep: bool) -> tuple[list[BinaryFacts], list[tuple[int, int, str]]]:
    told: list[tuple[int, int, str]] = []
    found = list(walk_binaries([str(CUDA_BIN)], deep, lambda *args: told.append(args)))
    return found, told


def test_reading_tells_progress_and_the_probe_times_each_section() -> None:
    for deep in (False, True):
        found, told = read_telling(deep)
        total = len(found)
        assert [done for done, _, _ in told] == list(range(1, total + 1))
        assert {t for _, t, _ in told} == {total}
        assert sorted(path for _, _, path in told) == sorted(f.path for f in found)
    facts = collect({"binaries": {"paths": [str(CUDA_BIN)]}, "gpu": {}}, System.local())
    assert set(facts["seconds"]) == {"binaries", "gpu"}
    assert all(isinstance(v, float) and v >= 0 for v in facts["seconds"].values())


def test_kernels_rows_are_the_same_from_the_summary() -> None:
    # `kernels --deep` without --all or --json reads summaries (binaries.local_binaries with
    # detail=False): one row per target, so the table must not change. libmix.so has every SASS
    # target twice (module doc) and libcomp_all.so compressed entries whose sizes add up.
    from archgap.binaries import local_binaries
    from archgap.report.kernels import file_rows

    detailed = local_binaries([str(CUDA_BIN)], deep=True)
    summaries = local_binaries([str(CUDA_BIN)], deep=True, detail=False)
    assert [f.path for f in summaries] == [f.path for f in detailed]
    assert sum(len(f.entries) for f in summaries) < sum(len(f.entries) for f in detailed)
    for full, summary in zip(detailed, summaries, strict=True):
        for human in (True, False):
            assert file_rows(summary, False, human) == file_rows(full, False, human)
