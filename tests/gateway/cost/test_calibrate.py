"""``squall calibrate`` against real gateways (elastic and static), and its bad inputs."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from gateway.commands import cost as cli
from gateway.cost.calibrate import attached_seconds, configuration
from gateway.cost.calibration import load_calibration
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess, free_port


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def creds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQUALL_ACCESS_KEY", ACCESS_KEY)
    monkeypatch.setenv("SQUALL_SECRET_KEY", SECRET_KEY)


def test_calibrate_elastic_then_append_a_static_gateway(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], creds: None) -> None:
    out = tmp_path / "cal.json"
    elastic = SquallProcess(tmp_path / "elastic", [
        "--cache-mode", "elastic", "--cache-size", "16MiB", "--backend-bandwidth", "4MB/s",
        "--cache-volume-bandwidth", "40MB/s", "--inactivity-delay", "0.3",
        "--cost-backend-size-gb", "2",
        "--workers", "1"]).start()  # next-size reaches one worker (docs/workers.md)
    try:
        code, stdout, err = run(capsys, "calibrate", "--endpoint", elastic.endpoint,
                                "--sizes", "2MB", "--cache-sizes", "3MB", "6MB",
                                "--writers", "2", "--object-size", "1MB", "--out", str(out))
        assert code == 0, err
        assert "calibrating" in err  # the progress bar
        assert "saved configuration 'posix-elastic'" in stdout
        status = httpx.get(f"{elastic.endpoint}/_squall/status").json()
        # one volume per point, of the size asked for (not the learned one)
        assert [b["size_bytes"] for b in status["elastic"]["bursts"]] == [3_000_000,
                                                                           6_000_000]
    finally:
        elastic.stop()
    (config,) = load_calibration(out)
    assert (config.backend_bandwidth_mb_s, config.backend_size_gb,
            config.cache_bandwidth_mb_s) == (4.0, 2.0, 40.0)
    assert [(p.cache_gb, p.dataset_gb) for p in config.points] == [(0.003, 0.002),
                                                                   (0.006, 0.002)]
    assert all(p.throughput_mb_s > 0 and p.attach_s > 0 for p in config.points)

    static = SquallProcess(tmp_path / "static", ["--cache-size", "0", "--backend-bandwidth",
                                                 "8MB/s"]).start()
    try:
        code, _, err = run(capsys, "calibrate", "--endpoint", static.endpoint, "--sizes",
                           "1MB", "--object-size", "512KB", "--writers", "2", "--out",
                           str(out), "--append", "--name", "static-slow",
                           "--backend-size-gb", "2")
        assert code == 0, err
    finally:
        static.stop()
    configs = load_calibration(out)
    assert [c.name for c in configs] == ["posix-elastic", "static-slow"]
    (point,) = configs[1].points
    assert (point.cache_gb, point.attach_s, configs[1].cache_bandwidth_mb_s) == (0, 0, 0)
    assert configs[1].backend_bandwidth_mb_s == 8.0


def test_calibrate_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    out = str(tmp_path / "cal.json")
    code, _, err = run(capsys, "calibrate", "--sizes", "lots", "--out", out)
    assert code == 2 and "invalid size" in err
    code, _, err = run(capsys, "calibrate", "--sizes", "0", "--out", out)
    assert code == 2 and "must be > 0" in err
    monkeypatch.delenv("SQUALL_ACCESS_KEY", raising=False)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    code, _, err = run(capsys, "calibrate", "--sizes", "1MB", "--out", out)
    assert code == 2 and "no credentials" in err
    monkeypatch.setenv("SQUALL_ACCESS_KEY", ACCESS_KEY)
    monkeypatch.setenv("SQUALL_SECRET_KEY", SECRET_KEY)
    code, _, err = run(capsys, "calibrate", "--endpoint", f"http://127.0.0.1:{free_port()}",
                       "--sizes", "1MB", "--out", out)
    assert code == 1 and "squall calibrate:" in err and "Traceback" not in err


def test_attached_seconds_and_configuration_gaps() -> None:
    status = {"cache_mode": "elastic", "elastic": {"bursts": [
        {"attached_at": 5.0, "detached_at": 9.0}, {"attached_at": 10.0, "detached_at": 12.5},
        {"attached_at": 20.0, "detached_at": None}]}}
    assert attached_seconds(status, 6.0) == 2.5
    with pytest.raises(ValueError, match="--backend-bandwidth-mb-s"):
        configuration({}, [], name="x", providers=1, backend_bandwidth_mb_s=None,
                      backend_size_gb=1, cache_bandwidth_mb_s=None)
    with pytest.raises(ValueError, match="--backend-size-gb"):
        configuration({}, [], name="x", providers=1, backend_bandwidth_mb_s=1,
                      backend_size_gb=None, cache_bandwidth_mb_s=None)
    doc = configuration({"backend": {"kind": "s3"}}, [], name="x", providers=3,
                        backend_bandwidth_mb_s=1, backend_size_gb=2, cache_bandwidth_mb_s=5)
    assert json.loads(json.dumps(doc))["backend"] == "s3" and doc["cache_bandwidth_mb_s"] == 0
