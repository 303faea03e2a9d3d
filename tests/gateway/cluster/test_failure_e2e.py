"""A member SIGKILLed. With a fixed member list (``--peers``): only its keys fail, naming
it; restarted, it serves them again. With a coordinator, the bucket configuration it
owns stays readable while its lease runs out, and can be changed once another member has
taken its keys over. (Mirrored write-back: test_mirrored_writeback_e2e.py.)"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from gateway.versioning.records import CONFIG_KEY
from gateway.versioning.state import STATUS_TTL
from tests.gateway.cluster.conftest import SLOW_BACKEND, Cluster
from tests.support.etcd import EtcdServer


def test_member_of_a_fixed_list_killed_and_restarted(tmp_path: Path) -> None:
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
            # the member that is down is named in the log, not to clients
            assert error["Code"] == "ServiceUnavailable"
            assert victim.endpoint not in error["Message"]
            assert err.value.response["ResponseMetadata"]["HTTPHeaders"]["retry-after"]
            with pytest.raises(ClientError, match="ServiceUnavailable"):
                s3[survivor].put_object(Bucket="crash", Key=lost[1], Body=b"refused")
            for key in kept:
                assert s3[survivor].get_object(Bucket="crash", Key=key)["Body"].read() == \
                    written[key]
            # DeleteObjects: the keys of the member that is down fail, naming it; the
            # others are deleted by their owners
            gone = kept[-1 - survivor // 2]
            answer = s3[survivor].delete_objects(Bucket="crash", Delete={"Objects": [
                {"Key": lost[2]}, {"Key": gone}, {"Key": lost[3]}]})
            assert [d["Key"] for d in answer["Deleted"]] == [gone]
            assert [(e["Key"], e["Code"]) for e in answer["Errors"]] == \
                [(lost[2], "ServiceUnavailable"), (lost[3], "ServiceUnavailable")]
            assert victim.endpoint not in answer["Errors"][0]["Message"]
            del written[gone]
            kept.remove(gone)
            s3[survivor].put_object(Bucket="crash", Key=kept[0], Body=b"still writable")
            written[kept[0]] = b"still writable"
            # a listing that could miss member 1's unflushed writes is refused
            with pytest.raises(ClientError) as err:
                s3[survivor].list_objects_v2(Bucket="crash")
            assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
            assert victim.endpoint not in err.value.response["Error"]["Message"]

        cluster.nodes[1] = restarted = cluster.member(1, victim.port)
        restarted.start()  # without the slow backend: it replays its cache and flushes
        for client in s3:
            for key, body in written.items():
                assert client.get_object(Bucket="crash", Key=key)["Body"].read() == body
            listed = [o["Key"] for o in client.list_objects_v2(Bucket="crash")["Contents"]]
            assert listed == sorted(written)
    finally:
        cluster.stop()


def test_bucket_configuration_readable_while_its_owner_is_down(tmp_path: Path,
                                                             etcd: EtcdServer) -> None:
    """With the member owning a bucket's configuration down, the others read the
    versioning status from the shared backend and keep versioning writes; changing the
    status waits for the owner until its lease expires and another member has taken its
    keys over."""
    cluster = Cluster(tmp_path, coordinator=etcd.url).start()
    try:
        s3 = cluster.clients
        bucket = next(f"cfg-{i}" for i in range(1000)
                      if cluster.owner(f"cfg-{i}", CONFIG_KEY) == 1)
        s3[0].create_bucket(Bucket=bucket)
        s3[0].put_bucket_versioning(Bucket=bucket,
                                    VersioningConfiguration={"Status": "Enabled"})
        while cluster.status(1)["dirty_objects"]:  # the status reached the backend
            time.sleep(0.05)
        victim = cluster.nodes[1]
        victim.kill()
        time.sleep(STATUS_TTL + 0.5)  # every member's cached status has expired
        key = cluster.key_owned_by(2, bucket)
        for client in (s3[0], s3[2]):
            assert client.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
            first = client.put_object(Bucket=bucket, Key=key, Body=b"one")["VersionId"]
            assert client.get_object(Bucket=bucket, Key=key, VersionId=first)["Body"] \
                .read() == b"one"
        cluster.wait_members([0, 2])  # (a change before this waits for the owner: 503)
        s3[2].put_bucket_versioning(Bucket=bucket,
                                    VersioningConfiguration={"Status": "Suspended"})
        assert s3[0].get_bucket_versioning(Bucket=bucket)["Status"] == "Suspended"
    finally:
        codes = [node.stop() for node in cluster.nodes]
        assert codes[0] == codes[2] == 0, codes  # member 1 was killed
