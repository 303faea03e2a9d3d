"""A two-member cluster whose members talk HTTPS to each other, trusting a private CA:
a fixed member list, and members coordinated by etcd (each advertising its https:// URL,
the default with --tls-cert)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from gateway.cluster.client import wait_members
from gateway.cluster.ring import owner_index
from tests.gateway.client.tls.certs import Authority
from tests.gateway.client.tls.conftest import HttpsSquall
from tests.support.etcd import EtcdServer
from tests.support.server import free_port

SECRET = "cluster-secret-for-the-tls-tests"


# With two workers per member, a TLS connection cannot be handed over: another member's
# requests reach the worker they are for through the relay (docs/workers.md).
@pytest.mark.parametrize(("workers", "coordinated"), [(1, False), (2, False), (1, True)])
def test_reads_and_writes_through_the_non_owner(ca: Authority, tmp_path: Path,
                                                server_cert: tuple[Path, Path],
                                                workers: int, coordinated: bool,
                                                etcd: EtcdServer) -> None:
    ports = [free_port(), free_port()]
    urls = [f"https://127.0.0.1:{p}" for p in ports]
    prefix = f"/tls-{uuid.uuid4().hex[:12]}/"
    placement = [["--coordinator", etcd.url, "--coordinator-prefix", prefix]
                 if coordinated else ["--peers", ",".join(urls), "--node-id", str(k)]
                 for k in range(2)]
    members = [HttpsSquall(tmp_path / f"node{k}", *server_cert, ca.cert,
                           ["--backend", f"posix:{tmp_path / 'shared'}", *placement[k],
                            "--peer-ca", str(ca.cert), "--workers", str(workers)],
                           env={"SQUALL_CLUSTER_SECRET": SECRET}, port=ports[k])
               for k in range(2)]
    try:
        for member in members:
            member.start()
        if coordinated:
            wait_members(urls, context=members[0].verify())
        s3: list[Any] = [m.s3() for m in members]
        s3[0].create_bucket(Bucket="tls-peers")
        keys = [f"k{i}" for i in range(80)]
        remote = [k for k in keys if owner_index(urls, "tls-peers", k) == 1][:12]
        assert remote
        for key in remote:  # written through member 0, owned by member 1
            s3[0].put_object(Bucket="tls-peers", Key=key, Body=key.encode() * 1000)
        for key in remote:
            assert s3[0].get_object(Bucket="tls-peers", Key=key)["Body"].read() == \
                key.encode() * 1000
            assert s3[1].get_object(Bucket="tls-peers", Key=key)["Body"].read() == \
                key.encode() * 1000
        listed = {o["Key"] for o in s3[0].list_objects_v2(Bucket="tls-peers")["Contents"]}
        assert set(remote) <= listed
    finally:
        for member in members:
            member.stop()


def test_an_https_member_needs_a_certificate(tmp_path: Path) -> None:
    port = free_port()
    done = subprocess.run(
        [sys.executable, "-m", "gateway.commands.cli", "serve", "--listen", f"127.0.0.1:{port}",
         "--data-dir", str(tmp_path / "data"), "--peers", f"https://127.0.0.1:{port}",
         "--node-id", "0"],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.strip().endswith("serves plain HTTP: give it --tls-cert and --tls-key")
