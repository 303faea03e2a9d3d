"""A mount of a three-member cluster with ``--route-to-owners``: every object request goes
straight to the key's owner, and what it writes is read back through every member."""

from __future__ import annotations

import os
from pathlib import Path

from tests.gateway.cluster.conftest import Cluster
from tests.gateway.fuse_mount.conftest import MountProcess

MiB = 1024 * 1024


def test_mount_sends_each_request_to_the_owner(tmp_path: Path) -> None:
    # The status views closed, as by default: the mount signs its read of the ring.
    cluster = Cluster(tmp_path, status_token="a-status-token-of-24-chars").start()
    try:
        cluster.clients[0].create_bucket(Bucket="routed")
        mount = MountProcess(cluster.nodes[0].endpoint, "routed", tmp_path / "mnt",
                             ["--route-to-owners"]).start()
        files = {f"run/rank-{i}.ckpt": os.urandom(1000 + i) for i in range(12)}
        files["run/big.ckpt"] = os.urandom(12 * MiB)  # multipart: the upload's owner
        try:
            before = cluster.forwarded()
            (mount.path / "run").mkdir()
            for name, data in files.items():
                (mount.path / name).write_bytes(data)
            for name, data in files.items():
                assert (mount.path / name).read_bytes() == data
            assert sorted(os.listdir(mount.path / "run")) == sorted(
                name.split("/")[1] for name in files)
            assert cluster.forwarded() == before  # no request took the extra hop
        finally:
            assert mount.stop() == 0, mount.log()
        owners = {cluster.owner("routed", name) for name in files}
        assert owners == {0, 1, 2}  # the keys are spread over every member
        for client in cluster.clients:
            for name, data in files.items():
                assert client.get_object(Bucket="routed", Key=name)["Body"].read() == data
    finally:
        cluster.stop()
