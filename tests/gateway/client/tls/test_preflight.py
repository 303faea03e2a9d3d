"""Start-up checks of the TLS options: one ``squall: ...`` line, exit status 2, nothing
written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.gateway.client.tls.certs import Authority, issue


def _serve(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway.commands.cli", "serve", "--listen", "127.0.0.1:0",
         "--data-dir", str(tmp_path / "data"), *args], capture_output=True, text=True,
        timeout=60, check=False)


def _refused(tmp_path: Path, *args: str) -> str:
    done = _serve(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("squall: "), done.stderr
    assert not (tmp_path / "data").exists()
    return lines[0]


def test_missing_certificate(tmp_path: Path, server_cert: tuple[Path, Path]) -> None:
    line = _refused(tmp_path, "--tls-cert", str(tmp_path / "nope.pem"),
                    "--tls-key", str(server_cert[1]))
    assert "--tls-cert" in line and "nope.pem" in line and "No such file" in line


def test_certificate_without_key(tmp_path: Path, server_cert: tuple[Path, Path]) -> None:
    line = _refused(tmp_path, "--tls-cert", str(server_cert[0]))
    assert line == "squall: --tls-cert needs --tls-key too"


def test_not_pem(tmp_path: Path, server_cert: tuple[Path, Path]) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    line = _refused(tmp_path, "--tls-cert", str(junk), "--tls-key", str(server_cert[1]))
    assert "no PEM certificate" in line
    line = _refused(tmp_path, "--tls-cert", str(server_cert[0]), "--tls-key", str(junk))
    assert "no PEM private key" in line


def test_key_of_another_certificate(tmp_path: Path, ca: Authority,
                                    server_cert: tuple[Path, Path]) -> None:
    _, other_key = issue(ca, tmp_path / "other")
    line = _refused(tmp_path, "--tls-cert", str(server_cert[0]), "--tls-key", str(other_key))
    assert "is not the key of the certificate" in line


def test_key_and_certificate_swapped(tmp_path: Path, server_cert: tuple[Path, Path]) -> None:
    line = _refused(tmp_path, "--tls-cert", str(server_cert[1]), "--tls-key",
                    str(server_cert[0]))
    assert "--tls-" in line


@pytest.mark.parametrize("workers", ["2"])
def test_refused_with_workers_too(tmp_path: Path, server_cert: tuple[Path, Path],
                                  workers: str) -> None:
    line = _refused(tmp_path, "--workers", workers, "--tls-cert", str(tmp_path / "x.pem"),
                    "--tls-key", str(server_cert[1]))
    assert "--tls-cert" in line


def test_bad_peer_ca(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("nothing\n")
    line = _refused(tmp_path, "--peer-ca", str(junk))
    assert line.startswith(f"squall: --peer-ca {junk}: ")
    line = _refused(tmp_path, "--peer-ca", str(tmp_path / "missing.pem"))
    assert "cannot read it" in line
