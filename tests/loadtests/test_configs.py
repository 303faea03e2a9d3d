from __future__ import annotations

import sys

import pytest

from loadtests.bench.configs import (
    SQUALL_TEMPLATE,
    GatewayConfig,
    parse_config,
    parse_named,
    server_command,
)
from loadtests.bench.workloads import select, standard_workloads


def test_parse_config() -> None:
    config = parse_config("throttled=--backend-bandwidth 20MiB/s --cache-size '1 GiB'")
    assert config == GatewayConfig(
        "throttled", ("--backend-bandwidth", "20MiB/s", "--cache-size", "1 GiB")
    )
    assert parse_config("plain=").args == ()
    assert parse_named("minio=http://127.0.0.1:9000") == ("minio", "http://127.0.0.1:9000")
    for bad in ("noequals", "=--durability none"):
        with pytest.raises(ValueError, match="NAME=VALUE"):
            parse_config(bad)


@pytest.mark.parametrize(
    ("args", "squall", "fsync"),
    [((), True, True), ((), False, None), (("--durability", "none"), True, False),
     (("--durability=none",), False, False), (("--durability", "fsync"), False, True)],
)  # fmt: skip
def test_fsync_is_recorded_from_the_arguments(
    args: tuple[str, ...], squall: bool, fsync: bool | None
) -> None:
    assert GatewayConfig("c", args).fsync(squall=squall) is fsync


def test_server_command_fills_the_template() -> None:
    argv = server_command(
        SQUALL_TEMPLATE, GatewayConfig("c", ("--durability", "none")), host="127.0.0.1",
        port=9123, data_dir="/tmp/d x", backend_dir="/tmp/b",
    )  # fmt: skip
    assert argv[-9:] == [
        "serve", "--listen", "127.0.0.1:9123", "--data-dir", "/tmp/d x", "--backend",
        "posix:/tmp/b", "--durability", "none",
    ]  # fmt: skip
    assert argv[0].endswith("squall") or argv[-11:-9] == ["-m", "gateway.commands.cli"]
    moto = server_command("{python} -m moto.server -p {port}", GatewayConfig("m"), port=1)
    assert moto == [sys.executable, "-m", "moto.server", "-p", "1"]


def test_standard_workloads_and_selection() -> None:
    workloads = standard_workloads(
        large_size=64 << 20, large_count=8, large_clients=[1, 4], small_size=4096,
        small_count=2000, small_clients=16, mixed_size=10 << 20, mixed_count=200,
        mixed_clients=8, mixed_objects=16, duration=10.0,
    )  # fmt: skip
    assert [w.key for w in workloads] == [
        "put-64MiB-c1", "get-64MiB-c1", "put-64MiB-c4", "get-64MiB-c4",
        "put-4KiB-c16", "get-4KiB-c16", "mixed-10MiB-c8",
    ]  # fmt: skip
    assert [w.unit for w in workloads] == ["MiB/s"] * 4 + ["ops/s"] * 3
    assert [w.objects for w in workloads] == [0, 2, 0, 8, 0, 32, 16]
    assert workloads[-1].title == "GET/PUT/STAT/DELETE 10MiB x8"
    assert [w.key for w in select(workloads, "mixed-10MiB-c8, put-4KiB-c16")] == [
        "put-4KiB-c16", "mixed-10MiB-c8",
    ]  # fmt: skip
    assert select(workloads, "") == workloads
    with pytest.raises(ValueError, match="unknown workloads"):
        select(workloads, "put-1GiB-c1")
