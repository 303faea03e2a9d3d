from __future__ import annotations

from loadtests.bench.engine import Measurement
from loadtests.bench.table import (
    Column,
    build_cpu_table,
    build_ratio_table,
    build_table,
    ratio,
    render_markdown,
    render_text,
)
from loadtests.bench.workloads import Workload

PUT = Workload("put", 64 << 20, 1, 8, 10.0)
SMALL = Workload("get", 4096, 16, 2000, 10.0, 32, "ops/s")


def m(mib: float = 0.0, ops: float = 0.0, errors: int = 0) -> Measurement:
    return Measurement(ops=1, rates=(mib, ops), errors=errors)


def table() -> list[tuple[str, ...]]:
    baseline = {PUT.key: m(mib=200), SMALL.key: m(ops=4000)}
    columns = [
        Column("squall", True, {PUT.key: m(mib=150), SMALL.key: m(ops=1000, errors=2)}),
        Column("nofsync", False, {PUT.key: "server failed: exited with 2"}),
    ]
    t = build_table([PUT, SMALL], baseline, columns)
    assert t.headers == (
        "workload", "unit", "posix direct", "squall", "squall / direct", "nofsync",
        "nofsync / direct",
    )  # fmt: skip
    return list(t.rows)


def test_rows_figures_and_ratios() -> None:
    rows = table()
    assert rows[0] == ("PUT 64MiB x1", "MiB/s", "200", "150", "0.75x", "failed", "")
    assert rows[1] == ("GET 4KiB x16", "ops/s", "4000", "1000 (2 err)", "0.25x", "-", "")
    assert rows[2] == ("PUT fsynced before ack", "", "yes", "yes", "", "no", "")


def test_measured_counts_give_rates() -> None:
    measured = Measurement(ops=10, nbytes=10 << 20, seconds=2.0)
    assert measured.mib_s == 5.0 and measured.ops_s == 5.0
    assert ratio(measured, Measurement(ops=5, nbytes=5 << 20, seconds=2.0), "MiB/s") == "2.00x"
    assert ratio(measured, Measurement(), "MiB/s") == ""  # nothing to divide by
    assert ratio("failed", measured, "MiB/s") == ""


def test_a_run_without_a_single_success() -> None:
    t = build_table([PUT], {PUT.key: Measurement(errors=3)}, [])
    assert t.rows[0][2] == "failed (3 err)"


def test_render_text_aligns_columns() -> None:
    baseline = {PUT.key: m(mib=200)}
    text = render_text(build_table([PUT], baseline, [Column("s", None, {PUT.key: m(mib=5.5)})]))
    lines = text.splitlines()
    assert len({len(line) for line in lines[:3]}) == 1  # header, rule and row line up
    assert lines[0].split() == ["workload", "unit", "posix", "direct", "s", "s", "/", "direct"]
    assert lines[2].split()[-2:] == ["5.50", "0.03x"]
    assert lines[3].split()[-1] == "?"  # unknown fsync


def test_render_markdown() -> None:
    md = render_markdown(build_table([PUT], {PUT.key: m(mib=200)}, []))
    assert md.splitlines() == [
        "| workload | unit | posix direct |",
        "|---|---:|---:|",
        "| PUT 64MiB x1 | MiB/s | 200 |",
        "| PUT fsynced before ack |  | yes |",
    ]


def test_ratio_table_puts_the_first_target_against_each_other() -> None:
    columns = [Column("squall", True, {PUT.key: m(mib=300)}),
               Column("minio", True, {PUT.key: m(mib=200)}),
               Column("vgw", False, {PUT.key: "server failed: no binary"})]
    t = build_ratio_table([PUT], columns)
    assert t.headers == ("workload", "squall / minio", "squall / vgw")
    assert t.rows == ((PUT.title, "1.50x", ""),)
    assert build_ratio_table([PUT], columns[:1]).rows == ()


def test_cpu_table_shows_microseconds_per_operation() -> None:
    measured = m(mib=100)
    measured.cpu_seconds = 0.5
    t = build_cpu_table([PUT], [Column("squall", True, {PUT.key: measured}),
                                Column("ext", None, {PUT.key: m(mib=1)})])
    assert t.headers == ("server CPU us/op", "squall")
    assert t.rows == ((PUT.title, "500000"),)  # 0.5 s of CPU over 1 operation


def test_client_cpu_table_shows_the_load_generators_microseconds_per_operation() -> None:
    measured, external = m(mib=100), m(mib=1)
    measured.cpu_seconds, measured.client_cpu_seconds = 0.5, 0.25
    external.client_cpu_seconds = 0.125
    t = build_cpu_table([PUT], [Column("squall", True, {PUT.key: measured}),
                                Column("ext", None, {PUT.key: external})], client=True)
    assert t.headers == ("client CPU us/op", "squall", "ext")
    assert t.rows == ((PUT.title, "250000", "125000"),)
