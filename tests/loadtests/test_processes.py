"""Workloads driven from several client processes: each takes its share of the clients,
operations and objects; together they do the workload once, timed as one phase."""

from __future__ import annotations

import dataclasses
import multiprocessing

import pytest

from gateway.client.credentials import Credentials
from loadtests.bench.engine import Measurement
from loadtests.bench.processes import merge, run_processes, share
from loadtests.bench.targets import TargetError
from loadtests.bench.workloads import Workload
from tests.loadtests.conftest import ACCESS_KEY, SECRET_KEY

GET = Workload("get", 4096, 5, 41, 60.0, 7)


def test_shares_add_up_to_the_workload() -> None:
    parts = [share(GET, 3, i) for i in range(3)]
    assert [p.clients for p in parts] == [2, 2, 1]
    assert sum(p.count for p in parts) == 41 and sum(p.objects for p in parts) == 7
    assert all(dataclasses.replace(p, clients=5, count=41, objects=7) == GET for p in parts)
    put = share(Workload("put", 10, 4, 8, 60.0), 2, 1)
    assert (put.clients, put.count, put.objects) == (2, 4, 0)


def test_merged_measurements_add_up_over_the_common_phase() -> None:
    a = Measurement(ops=3, nbytes=30, errors=1, first_error="E: a", latencies=[0.1, 0.2, 0.3],
                    client_cpu_seconds=0.5)
    b = Measurement(ops=2, nbytes=20, latencies=[0.4, 0.5], client_cpu_seconds=0.25)
    m = merge([a, b], seconds=2.0)
    assert (m.ops, m.nbytes, m.errors, m.first_error) == (5, 50, 1, "E: a")
    assert sorted(m.latencies) == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert (m.seconds, m.ops_s, m.client_cpu_seconds) == (2.0, 2.5, 0.75)


def _cpu() -> float:
    return 1.0  # a server's CPU, constant: its share of the phase is 0


def test_two_processes_run_a_workload_once(endpoint: str) -> None:
    credentials = Credentials(ACCESS_KEY, SECRET_KEY)
    m = run_processes(endpoint, credentials, "us-east-1", "processes-test",
                      Workload("get", 100_000, 4, 20, 60.0, 6), 2, _cpu)
    assert (m.ops, m.nbytes, m.errors) == (20, 2_000_000, 0)
    assert len(m.latencies) == 20 and m.seconds > 0 and m.cpu_seconds == 0.0
    assert m.client_cpu_seconds is not None and m.client_cpu_seconds > 0
    one = run_processes(endpoint, credentials, "us-east-1", "processes-test",
                        Workload("put", 1000, 1, 5, 60.0), 2)  # one client: one process
    assert (one.ops, one.errors, one.cpu_seconds) == (5, 0, None)


def test_a_client_process_that_fails_is_reported() -> None:
    with pytest.raises(TargetError, match="client process failed"):
        run_processes("http://127.0.0.1:9", Credentials(ACCESS_KEY, SECRET_KEY), "us-east-1",
                      "b", Workload("get", 10, 2, 4, 60.0, 2), 2)
    assert multiprocessing.active_children() == []
