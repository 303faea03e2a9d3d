"""`squall serve`: defaults, generated credentials, settings sources and bad input."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from gateway.config.settings import load_settings
from tests.support.server import SquallProcess, free_port


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway.commands.cli", *args], cwd=cwd,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=60, check=False)


@pytest.mark.parametrize("args,message", [
    (["--listen", "nonsense"], "listen address must be HOST:PORT"),
    (["--listen", "127.0.0.1:99999"], "listen address must be HOST:PORT"),
    (["--backend", "posix"], "backend must be KIND:ARGS"),
    (["--backend", "tape:/dev/st0"], "unknown backend kind 'tape'"),
    (["--durability", "maybe"], "invalid choice"),
])
def test_bad_options_give_clear_messages(tmp_path: Path, args: list[str], message: str) -> None:
    result = run_cli("serve", "--data-dir", str(tmp_path / "d"), *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr  # no usage before it
    assert "Traceback" not in result.stderr


def test_bad_config_file(tmp_path: Path) -> None:
    config = tmp_path / "squall.toml"
    config.write_text("listen = [unclosed")
    result = run_cli("serve", "--config", str(config))
    assert result.returncode == 2 and "not valid TOML" in result.stderr
    config.write_text('colour = "blue"\n')
    result = run_cli("serve", "--config", str(config))
    assert result.returncode == 2 and "unknown key(s) in config file" in result.stderr
    result = run_cli("serve", "--config", str(tmp_path / "missing.toml"))
    assert result.returncode == 2 and "cannot read config file" in result.stderr


def test_settings_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "squall.toml"
    config.write_text('listen = "127.0.0.1:1"\nregion = "eu-west-1"\ndurability = "none"\n')
    monkeypatch.setenv("SQUALL_LISTEN", "127.0.0.1:2")
    monkeypatch.setenv("SQUALL_REGION", "us-west-2")
    settings = load_settings(config, listen="127.0.0.1:3", region=None)
    assert settings.listen == "127.0.0.1:3"  # flag beats environment
    assert settings.region == "us-west-2"  # environment beats file
    assert settings.durability == "none"  # file beats default


def test_sigv2_setting_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().sigv2 is True  # on by default
    config = tmp_path / "squall.toml"
    config.write_text("sigv2 = false\n")
    assert load_settings(config).sigv2 is False
    monkeypatch.setenv("SQUALL_SIGV2", "false")
    assert load_settings(sigv2=None).sigv2 is False
    monkeypatch.delenv("SQUALL_SIGV2")
    assert load_settings(sigv2=False).sigv2 is False  # what --no-sigv2 passes


def test_default_serve_generates_credentials_once(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUALL_")}
    proc = subprocess.Popen([sys.executable, "-m", "gateway.commands.cli", "serve", "--listen",
                             f"127.0.0.1:{port}", "--public-status"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        server = SquallProcess(tmp_path / "squall-data", port=port)
        server.proc = proc
        lines = []
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "secret key:" in line:
                break
        creds = tmp_path / "squall-data" / "credentials.json"
        assert stat.S_IMODE(creds.stat().st_mode) == 0o600
        assert (tmp_path / "squall-data" / "objects").is_dir()
        assert "access key:" in "".join(lines)
        for _ in range(200):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/_squall/health").status_code == 200:
                    break
            except httpx.HTTPError:
                import time
                time.sleep(0.05)
        status = httpx.get(f"http://127.0.0.1:{port}/_squall/status").json()
        assert status["backend"]["kind"] == "posix"
        metrics = httpx.get(f"http://127.0.0.1:{port}/_squall/metrics").text
        assert "squall_requests" in metrics
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
    first = creds.read_text()
    # A second start reuses the stored pair and does not print the secret again.
    result = subprocess.run([sys.executable, "-m", "gateway.commands.cli", "serve", "--listen",
                             "nonsense"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            check=False)
    assert result.returncode == 2
    assert creds.read_text() == first


def test_sigterm_finishes_in_flight_requests(tmp_path: Path) -> None:
    from tests.conftest import make_client

    server = SquallProcess(tmp_path / "data").start()
    s3 = make_client(server.endpoint)
    s3.create_bucket(Bucket="drain")
    body = os.urandom(32 * 1024 * 1024)
    import threading

    result: dict[str, object] = {}

    def upload() -> None:
        try:
            result["etag"] = s3.put_object(Bucket="drain", Key="big", Body=body)["ETag"]
        except Exception as exc:  # noqa: BLE001
            result["error"] = exc

    thread = threading.Thread(target=upload)
    thread.start()
    import time
    time.sleep(0.05)
    assert server.proc is not None
    server.proc.terminate()
    thread.join(60)
    assert server.proc.wait(60) == 0
    if "etag" in result:
        # Acknowledged before exit: it must be there after a restart.
        server = SquallProcess(tmp_path / "data").start()
        s3 = make_client(server.endpoint)
        assert s3.get_object(Bucket="drain", Key="big")["Body"].read() == body
        server.stop()


def test_several_cache_volumes_from_the_config_file(tmp_path: Path) -> None:
    from gateway.components import cache_settings

    config = tmp_path / "squall.toml"
    config.write_text(f'[[cache_volumes]]\npath = "{tmp_path / "fast1"}"\n'
                      'capacity_bytes = "64MiB"\n'
                      f'[[cache_volumes]]\npath = "{tmp_path / "fast2"}"\n'
                      'capacity_bytes = 1048576\n')
    caching = cache_settings(load_settings(config))
    assert [v.capacity_bytes for v in caching.volumes] == [64 * 2**20, 2**20]
    config.write_text('[[cache_volumes]]\npath = "/x"\ncapacity_bytes = "lots"\n')
    result = run_cli("serve", "--config", str(config))
    assert result.returncode == 2 and "cache_volumes" in result.stderr


def test_cost_report_from_a_running_gateway(squall: SquallProcess) -> None:
    status = httpx.get(f"{squall.endpoint}/_squall/status").json()
    assert status["cost_agbs"] >= 0 and status["cost"]["unit"] == "AGBs"
    result = run_cli("cost", "--endpoint", squall.endpoint)
    assert result.returncode == 0, result.stderr
    assert "adjusted storage accumulation" in result.stdout
    # The session gateway sets none of B_b, N, B_c: the report says so.
    assert "missing settings" in result.stdout
    for flag in ("--backend-bandwidth (B_b)", "--cost-backend-size-gb (N)",
                 "--cost-cache-bandwidth-mb-s (B_c)"):
        assert flag in result.stdout
    assert "squall_cost_agbs" in httpx.get(f"{squall.endpoint}/_squall/metrics").text
