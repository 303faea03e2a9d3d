"""The capped-hosts scale-out benchmark: its report, and a real CPU-capped cgroup."""

from __future__ import annotations

import subprocess
import sys

import pytest

from loadtests.bench.cgroups import CpuGroup, cgroups_unavailable
from loadtests.bench.engine import Measurement
from loadtests.bench.hosts import HostRow, hosts_report, shapes


def test_the_report_gives_ratios_cpu_per_request_and_hosts_needed() -> None:
    put, get, big = shapes(100, 1.0)
    rows = [HostRow("1 gateway", 1, put, Measurement(ops=400, seconds=2.0, cpu_seconds=0.2)),
            HostRow("1 gateway", 1, get, Measurement(ops=900, seconds=1.0, cpu_seconds=0.3)),
            HostRow("3 members", 3, put, Measurement(ops=1000, seconds=2.0, cpu_seconds=0.6,
                                                      errors=2))]
    report = hosts_report(rows, [put, get, big], 0.4, 1000)
    lines = report.splitlines()
    assert "| 1 gateway | 200 | 900 | - |" in lines
    assert "| 3 members | 500 (2.50x) (2 errors) | - | - |" in lines
    assert "| 1 gateway | 500 | 333 | - |" in lines  # CPU microseconds per request
    assert "| 3 members | 600 | - | - |" in lines
    # 1000 requests/s at 500 us each: 0.5 CPU, two hosts of 0.4 CPU
    assert "| 1 gateway | 2 | 1 | - |" in lines
    assert "| 3 members | 2 | - | - |" in lines


@pytest.mark.skipif(cgroups_unavailable() is not None, reason=str(cgroups_unavailable()))
def test_a_capped_group_counts_the_cpu_of_its_processes() -> None:
    group = CpuGroup(0.5)
    try:
        proc = subprocess.Popen([sys.executable, "-c",
                                 ("import sys, time\nsys.stdin.readline()\n"
                                 "end = time.process_time() + 0.2\n"
                                 "while time.process_time() < end: pass")],
                                stdin=subprocess.PIPE)
        try:
            group.add(proc.pid)
            before = group.seconds()
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            proc.stdin.close()
            assert proc.wait(60) == 0
        finally:
            proc.kill()
            proc.wait()
        assert group.seconds() - before >= 0.15
    finally:
        group.close()
