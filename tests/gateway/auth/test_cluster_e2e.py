"""A closed cluster: members still register and forward to each other (peer signature),
clients need a signature; users copied to every member (docs/security.md, "In a
cluster")."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import httpx

from gateway.client.signing import status_headers
from tests.gateway.auth.test_users_e2e import add_user, client
from tests.gateway.cluster.conftest import Cluster
from tests.support.etcd import EtcdServer
from tests.support.server import ACCESS_KEY, SECRET_KEY

SIGNED = {"SQUALL_ACCESS_KEY": ACCESS_KEY, "SQUALL_SECRET_KEY": SECRET_KEY}


def ring_view(endpoint: str) -> httpx.Response:
    url = f"{endpoint}/_squall/cluster"
    return httpx.get(url, headers=status_headers(url, environ=SIGNED), timeout=10)


def test_closed_cluster_members_see_each_other_and_share_copied_users(
        tmp_path: Path, etcd: EtcdServer) -> None:
    cluster = Cluster(tmp_path, size=2, coordinator=etcd.url, status_token="closed-status-view-token")
    cluster.start()
    try:
        for node in cluster.nodes:
            assert httpx.get(f"{node.endpoint}/_squall/cluster", timeout=10).status_code == 403
        deadline = time.monotonic() + 30
        while [m["state"] for m in ring_view(cluster.nodes[0].endpoint).json()["members"]] \
                != ["up", "up"]:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        user = add_user(cluster.nodes[0], "jane")
        shutil.copy2(cluster.nodes[0].data_dir / "users.json",
                     cluster.nodes[1].data_dir / "users.json")
        time.sleep(1.0)
        s3 = client(cluster.nodes[0].endpoint, user["access_key"], user["secret_key"])
        s3.create_bucket(Bucket="jane")
        key = cluster.key_owned_by(1, "jane")  # forwarded to member 1, which checks it
        s3.put_object(Bucket="jane", Key=key, Body=b"shared users")
        assert s3.get_object(Bucket="jane", Key=key)["Body"].read() == b"shared users"
        listed = json.loads((cluster.nodes[1].data_dir / "users.json").read_text())
        assert [u["canonical_id"] for u in listed["users"]] == [user["canonical_id"]]
    finally:
        cluster.stop()
