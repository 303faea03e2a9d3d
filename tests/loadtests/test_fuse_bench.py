"""loadtests.bench.fuse: the table it builds, and one tiny real run (gateway, mounts, dd)."""

from __future__ import annotations

import os
import shutil
import time
from functools import partial
from pathlib import Path

import pytest

from loadtests.bench.cpu import cpu_seconds, machine_cpu_seconds
from loadtests.bench.fuse import (
    WORKLOADS,
    Column,
    CpuMeter,
    MiB,
    Report,
    Sizes,
    build_table,
    cpu_table,
    format_ratio,
    fuse_unavailable,
    median_cells,
    notes,
    render_markdown,
    run,
)

MOUNT = Column("squall mount", {"write_1m": 50.0, "read_1m": 200.0, "write_4k": 40.0,
                                "read_4k": 150.0, "creates": 60.0})
DIRECT = Column("boto3", {"write_1m": 100.0, "read_1m": 400.0, "write_4k": 100.0,
                          "read_4k": 300.0, "creates": 120.0})


def test_table_has_one_row_per_workload_and_the_two_ratios() -> None:
    s3fs = Column("s3fs", {"write_1m": 25.0, "read_1m": 100.0, "write_4k": 20.0,
                           "read_4k": 75.0, "creates": 30.0})
    rows = build_table(MOUNT, DIRECT, s3fs)
    assert rows[0] == ["workload", "unit", "squall mount", "boto3", "s3fs",
                       "squall mount / boto3", "squall mount / s3fs"]
    assert [r[0] for r in rows[1:]] == [w.title for w in WORKLOADS]
    assert rows[1] == ["sequential write, bs=1M", "MiB/s", "50.0", "100", "25.0", "0.50x", "2.00x"]
    assert rows[5] == ["small files created", "files/s", "60.0", "120", "30.0", "0.50x", "2.00x"]


def test_missing_column_shows_na_no_ratio_and_its_reason_once() -> None:
    s3fs = Column("s3fs", dict.fromkeys((w.key for w in WORKLOADS), "s3fs is not installed"))
    rows = build_table(MOUNT, DIRECT, s3fs)
    assert all(r[4] == "n/a" and r[6] == "-" for r in rows[1:])
    assert [r[5] for r in rows[1:]] == ["0.50x", "0.50x", "0.40x", "0.50x", "0.50x"]
    assert notes([MOUNT, DIRECT, s3fs]) == ["s3fs: s3fs is not installed"]
    assert build_table(MOUNT, Column("boto3", {}), s3fs)[1][3] == "-"


def test_ratio_needs_two_positive_figures() -> None:
    assert format_ratio(3.0, 2.0) == "1.50x"
    assert format_ratio(3.0, 0.0) == "-"
    assert format_ratio("failed", 2.0) == "-"
    assert format_ratio(3.0, None) == "-"


def test_markdown_is_aligned_with_a_separator_row() -> None:
    text = render_markdown([["a", "bb"], ["ccc", "d"]])
    assert text.splitlines() == ["| a   | bb |", "|-----|----|", "| ccc | d  |"]
    report = Report((MOUNT, DIRECT, Column("s3fs", {"creates": "skipped"})), ("s3fs: skipped",))
    lines = report.markdown().splitlines()
    assert len(lines) == 2 + len(WORKLOADS) + 2
    assert lines[-1] == "* s3fs: skipped"
    assert len({len(line) for line in lines[: 2 + len(WORKLOADS)]}) == 1


def test_median_of_runs_keeps_reasons() -> None:
    runs = [{"write_1m": 10.0, "creates": "n/a"}, {"write_1m": 30.0, "creates": "n/a"},
            {"write_1m": 20.0, "creates": "n/a"}]
    assert median_cells(runs) == {"write_1m": 20.0, "creates": "n/a"}


@pytest.mark.skipif(fuse_unavailable() is not None, reason=f"no FUSE: {fuse_unavailable()}")
@pytest.mark.skipif(shutil.which("dd") is None, reason="dd is not installed")
def test_tiny_end_to_end_run(tmp_path: Path) -> None:
    """A real gateway, ``squall mount`` and (if installed) s3fs, with 4 MiB and 20 files;
    the machine's page cache is left alone (reads go to files uploaded beforehand)."""
    report = run(Sizes(4 * MiB, 20, 1024), tmp_path, drop_page_cache=False, repeat=2,
                 mount_options=["--writeback-cache"], cpu=True)
    mount, direct, s3fs = report.columns
    assert mount.name == "squall mount --writeback-cache"
    for column in (mount, direct):
        assert set(column.results) == {w.key for w in WORKLOADS}
        assert all(isinstance(v, float) and v > 0 for v in column.results.values()), column
    if shutil.which("s3fs") is not None:
        assert all(isinstance(v, float) and v > 0 for v in s3fs.results.values()), s3fs
    assert not any(p.is_mount() for p in tmp_path.iterdir())  # everything unmounted
    assert "| small files created " in report.markdown()
    assert "page cache not dropped" in report.markdown()
    columns = ["mount process", "gateway (mount)", "machine (mount)", "boto3 client",
               "gateway (boto3)", "machine (boto3)"]
    if shutil.which("s3fs") is not None:
        columns += ["s3fs process", "gateway (s3fs)", "machine (s3fs)"]
    assert report.cpu[0] == ["workload", "CPU per", *columns]
    assert report.cores[0] == ["workload", *columns]
    assert "CPU time per unit of work" in report.markdown()
    assert "Cores kept busy during each workload" in report.markdown()


def test_cpu_meter_reports_ms_per_unit_of_this_process_and_the_table_has_a_row_each() -> None:
    meter = CpuMeter({"here": time.process_time, "also here": partial(cpu_seconds, os.getpid()),
                      "machine": machine_cpu_seconds})
    for _ in range(2):
        with meter.measure("write_1m", 4.0):
            deadline = time.process_time() + 0.02
            while time.process_time() < deadline:  # burn 20 ms of CPU
                pass
    medians = meter.medians()["write_1m"]
    assert medians["here"] >= 4.0  # 20 ms over 4 MiB
    assert medians["also here"] >= 0.0
    # the machine's busy time includes ours (its clock ticks every 10 ms: 2.5 ms per MiB)
    assert medians["machine"] >= medians["here"] - 5.0
    cores = meter.medians(cores=True)["write_1m"]
    # one spinning thread keeps at most one core busy (less when others share it); the
    # test runner's own threads (xdist's channel) may add a little of a second one
    assert 0.0 < cores["here"] <= 1.25
    assert cores["machine"] > 0.0
    rows = cpu_table([meter])
    assert rows[0] == ["workload", "CPU per", "here", "also here", "machine"]
    assert rows[1][:2] == ["sequential write, bs=1M", "MiB"] and rows[1][2].endswith(" ms")
    assert rows[5][1:] == ["file", "-", "-", "-"]  # small files were not measured
    busy = cpu_table([meter], cores=True)
    assert busy[0] == ["workload", "here", "also here", "machine"]
    assert float(busy[1][1]) == pytest.approx(cores["here"], abs=0.01)
    assert cpu_seconds(os.getpid()) > 0
