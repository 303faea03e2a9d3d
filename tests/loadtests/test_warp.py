from __future__ import annotations

import pytest

from loadtests.bench.warp import (
    WarpFailed,
    WarpOp,
    measurement_from_warp,
    parse_warp,
    warp_command,
)
from loadtests.bench.workloads import Workload

# The current report format (warp >= 0.8): a preparation PUT report precedes the GET one.
CURRENT_GET = """\
Reqs: 4521, Errs:0, Objs:4521, Bytes: 282.6GiB
 -------
Report: PUT. Concurrency: 4. Ran: 5s
 * Average: 5 MiB/s, 5 obj/s
 * Reqs: Avg: 99ms, 50%: 80ms, 90%: 0.2s, 99%: 900us

──────────────────────────────────

Report: GET. Concurrency: 4. Ran: 9s
 * Average: 1532.57 MiB/s, 23.95 obj/s
 * Reqs: Avg: 166.5ms, 50%: 160.1ms, 90%: 190.0ms, 99%: 230.3ms, Fastest: 101.8ms
 * TTFB: Avg: 3ms, Best: 1ms, 25th: 2ms, Median: 3ms, 75th: 3ms, 90th: 4ms, 99th: 9ms

Throughput, split into 9 x 1s:
 * Fastest: 1609.3MiB/s, 25.15 obj/s
 * 50% Median: 1540.1MiB/s, 24.06 obj/s
 * Slowest: 1401.2MiB/s, 21.89 obj/s
"""

CURRENT_MIXED = """\
Report: DELETE. Concurrency: 8. Ran: 57s
 * Average: 196.95 obj/s
 * Reqs: Avg: 0.7ms, 50%: 0.5ms, 90%: 1.3ms, 99%: 3.3ms

Report: GET. Concurrency: 8. Ran: 57s
 * Average: 86.51 MiB/s, 885.90 obj/s

Report: PUT. Concurrency: 8. Ran: 57s
 * Average: 28.82 MiB/s, 295.12 obj/s
 * Errors: 3

Report: STAT. Concurrency: 8. Ran: 57s
 * Average: 590.61 obj/s

Report: Total. Concurrency: 8. Ran: 57s
 * Average: 115.33 MiB/s, 1968.57 obj/s

Throughput, split into 57 x 1s:
 * Fastest: 138.1MiB/s, 2353.11 obj/s
"""

OLD_PUT = """\
Operation: PUT (408). Ran 32s. Size: 10485760 bytes. Concurrency: 20.

Requests considered: 330:
 * Avg: 1.274s, 50%: 417ms, 90%: 4.385s, 99%: 5.202s, Fastest: 279ms, Slowest: 5.223s

Throughput:
* Average: 152.59 MiB/s, 15.26 obj/s

Throughput, split into 29 x 1s:
 * Fastest: 160.1MiB/s, 16.01 obj/s
"""

OLD_MIXED = """\
Mixed operations.

Operation: GET
 * 632.28 MiB/s, 354.78 obj/s (59.993s, starting 07:44:05 PST) (45.0% of operations)

Operation: STAT
 * 236.38 obj/s (59.966s, starting 07:44:05 PST) (30.0% of operations)

Operation: PUT
 * 1.5 GiB/s, 118.23 obj/s (59.994s, starting 07:44:05 PST) (15.0% of operations)

Operation: DELETE
 * 78.91 obj/s (59.927s, starting 07:44:05 PST) (10.0% of operations)
"""

BIG = Workload("get", 64 << 20, 4, 8, 10.0, 8)
MIXED = Workload("mixed", 10 << 20, 8, 200, 10.0, 16, "ops/s")


def test_current_format_keeps_each_report() -> None:
    ops = parse_warp(CURRENT_GET)
    assert ops["PUT"] == WarpOp(5.0, 5.0)
    assert ops["GET"] == WarpOp(1532.57, 23.95)  # the Average, not Fastest/Median


def test_current_mixed_with_total_and_errors() -> None:
    ops = parse_warp(CURRENT_MIXED)
    assert ops["DELETE"] == WarpOp(0.0, 196.95)
    assert ops["PUT"].errors == 3
    assert ops["TOTAL"] == WarpOp(115.33, 1968.57)
    m = measurement_from_warp(MIXED, ops)
    assert m.ops_s == 1968.57 and m.mib_s == 115.33 and m.errors == 3


def test_old_formats() -> None:
    assert parse_warp(OLD_PUT)["PUT"] == WarpOp(152.59, 15.26)
    ops = parse_warp(OLD_MIXED)
    assert ops["PUT"].mib_s == pytest.approx(1.5 * 1024)
    assert ops["STAT"] == WarpOp(0.0, 236.38)
    m = measurement_from_warp(MIXED, ops)  # no Total: the operations are summed
    assert m.ops_s == pytest.approx(354.78 + 236.38 + 118.23 + 78.91)


def test_measurement_picks_the_workloads_operation() -> None:
    m = measurement_from_warp(BIG, parse_warp(CURRENT_GET))
    assert m.value("MiB/s") == 1532.57
    with pytest.raises(WarpFailed, match="no PUT summary"):
        measurement_from_warp(Workload("put", 1, 1, 1, 1.0), parse_warp(OLD_MIXED[:40]))


def test_warp_command_has_the_shape() -> None:
    argv = warp_command(
        MIXED, endpoint="http://127.0.0.1:9000", access_key="AK", secret_key="SK",
        region="us-east-1", bucket="bench", extra=["--noclear"],
    )  # fmt: skip
    assert argv[:2] == ["warp", "mixed"]

    def value(flag: str) -> str:
        return argv[argv.index(flag) + 1]

    assert value("--host") == "127.0.0.1:9000"
    assert value("--obj.size") == "10MiB"
    assert value("--concurrent") == "8"
    assert value("--duration") == "10s"
    assert value("--objects") == "16"
    assert value("--get-distrib") == "45" and value("--delete-distrib") == "10"
    assert argv[-1] == "--noclear"
    put = warp_command(
        Workload("put", 4096, 16, 100, 0.2), endpoint="http://h:1", access_key="a",
        secret_key="s", region="r", bucket="b",
    )  # fmt: skip
    assert "--objects" not in put
    assert put[put.index("--duration") + 1] == "1s"
