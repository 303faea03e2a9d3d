"""A member SIGKILLed: only its keys fail, naming it; restarted, it serves them again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from tests.gateway.cluster.conftest import SLOW_BACKEND, Cluster


def test_member_killed_and_restarted(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, args=SLOW_BACKEND).start()
    try:
        s3 = cluster.clients
        s3[0].create_bucket(Bucket="crash")
        written = {f"key-{i}": os.urandom(100 + i) for i in range(60)}
        for i, (key, body) in enumerate(written.items()):
            s3[i % 3].put_object(Bucket="crash", Key=key, Body=body)
        assert cluster.status(1)["dirty_objects"] > 0  # member 1 holds unflushed writes
        victim = cluster.nodes[1]
        victim.kill()
        lost = [k for k in written if cluster.owner("crash", k) == 1]
        kept = [k for k in written if cluster.owner("crash", k) != 1]
        for survivor in (0, 2):
            with pytest.raises(ClientError) as err:
                s3[survivor].get_object(Bucket="crash", Key=lost[0])
            error = err.value.response["Error"]
            assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
            assert error["Code"] == "ServiceUnavailable" and victim.endpoint in error["Message"]
            with pytest.raises(ClientError, match="ServiceUnavailable"):
                s3[survivor].put_object(Bucket="crash", Key=lost[1], Body=b"refused")
            for key in kept:
                assert s3[survivor].get_object(Bucket="crash", Key=key)["Body"].read() == \
                    written[key]
            s3[survivor].put_object(Bucket="crash", Key=kept[0], Body=b"still writable")
            written[kept[0]] = b"still writable"
            # a listing that could miss member 1's unflushed writes is refused, naming it
            with pytest.raises(ClientError) as err:
                s3[survivor].list_objects_v2(Bucket="crash")
            assert victim.endpoint in err.value.response["Error"]["Message"]
        cluster.wait_health(0, ["up", "down", "up"])

        cluster.nodes[1] = restarted = cluster.member(1, victim.port, ())
        restarted.start()  # without the slow backend: it replays its cache and flushes
        cluster.wait_health(0, ["up", "up", "up"])
        for client in s3:
            for key, body in written.items():
                assert client.get_object(Bucket="crash", Key=key)["Body"].read() == body
            listed = [o["Key"] for o in client.list_objects_v2(Bucket="crash")["Contents"]]
            assert listed == sorted(written)
    finally:
        cluster.stop()
