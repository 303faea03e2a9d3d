"""Write at one member, read and list at the others at once: never stale, never missing."""

from __future__ import annotations

import os
import random
import threading

import pytest
from botocore.exceptions import ClientError

from tests.gateway.cluster.conftest import Cluster

TRIALS = 200


def _keys(client, bucket: str, **kwargs: object) -> list[str]:  # type: ignore[no-untyped-def]
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, **kwargs)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def test_write_anywhere_read_and_list_everywhere(cluster: Cluster, cbucket: str) -> None:
    rng = random.Random(7)
    expected: dict[str, bytes] = {}
    problems: list[str] = []
    for trial in range(TRIALS):
        writer = trial % 3
        others = [c for i, c in enumerate(cluster.clients) if i != writer]
        if expected and trial % 5 == 4:  # a deletion
            key = rng.choice(sorted(expected))
            cluster.clients[writer].delete_object(Bucket=cbucket, Key=key)
            del expected[key]
            for client in others:
                with pytest.raises(ClientError) as err:
                    client.head_object(Bucket=cbucket, Key=key)
                if err.value.response["Error"]["Code"] != "404":
                    problems.append(f"{key}: deleted but HEAD says {err.value}")
                if key in _keys(client, cbucket, Prefix=key):
                    problems.append(f"{key}: deleted but still listed")
            continue
        # new keys, and overwrites of earlier ones (the stale version must never show)
        key = rng.choice(sorted(expected)) if expected and trial % 3 == 2 else f"d{trial % 7}/k{trial}"
        body = os.urandom(rng.randint(0, 2048))
        cluster.clients[writer].put_object(Bucket=cbucket, Key=key, Body=body)
        expected[key] = body
        for client in others:
            got = client.get_object(Bucket=cbucket, Key=key)["Body"].read()
            if got != body:
                problems.append(f"{key}: stale read")
            listed = client.list_objects_v2(Bucket=cbucket, Prefix=key)
            sizes = {o["Key"]: o["Size"] for o in listed.get("Contents", [])}
            if sizes.get(key) != len(body):
                problems.append(f"{key}: missing or stale in a listing: {sizes.get(key)}")
    assert problems == []
    # What was written is still unflushed in its owners' caches: the listings merged it.
    assert all(cluster.status(i)["dirty_objects"] > 0 for i in range(3))
    for client in cluster.clients:
        assert _keys(client, cbucket) == sorted(expected)
        assert _keys(client, cbucket, PaginationConfig={"PageSize": 7}) == sorted(expected)


def test_pagination_and_common_prefixes_across_members(cluster: Cluster, cbucket: str) -> None:
    keys = [f"{d}/{f}" for d in ("a", "b", "c", "d") for f in range(6)] + ["top1", "top2"]
    for i, key in enumerate(keys):
        cluster.clients[i % 3].put_object(Bucket=cbucket, Key=key, Body=b"x")
    cluster.clients[1].delete_object(Bucket=cbucket, Key="c/3")
    for client in cluster.clients:
        for size in (1, 2, 5, 1000):
            prefixes: list[str] = []
            contents: list[str] = []
            pages = client.get_paginator("list_objects_v2").paginate(
                Bucket=cbucket, Delimiter="/", PaginationConfig={"PageSize": size})
            for page in pages:
                prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
                contents += [o["Key"] for o in page.get("Contents", [])]
            assert prefixes == ["a/", "b/", "c/", "d/"] and contents == ["top1", "top2"]
            v1 = client.get_paginator("list_objects").paginate(
                Bucket=cbucket, Prefix="c/", PaginationConfig={"PageSize": size})
            assert [o["Key"] for p in v1 for o in p.get("Contents", [])] == \
                [f"c/{f}" for f in range(6) if f != 3]


def test_concurrent_writers_of_one_key(cluster: Cluster, cbucket: str) -> None:
    key = "contended"
    acknowledged: set[bytes] = set()
    lock = threading.Lock()

    def write(member: int) -> None:
        for n in range(15):
            body = f"member {member} write {n} ".encode() * 50
            cluster.clients[member].put_object(Bucket=cbucket, Key=key, Body=body)
            with lock:
                acknowledged.add(body)

    threads = [threading.Thread(target=write, args=(m,)) for m in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    finals = {c.get_object(Bucket=cbucket, Key=key)["Body"].read() for c in cluster.clients}
    assert len(finals) == 1 and finals <= acknowledged
    etags = {c.head_object(Bucket=cbucket, Key=key)["ETag"] for c in cluster.clients}
    assert len(etags) == 1


def test_versions_written_anywhere_are_listed_everywhere(cluster: Cluster, cbucket: str) -> None:
    """Unflushed versions and delete markers of keys owned by every member appear, in
    order and paginated, in ListObjectVersions through each member."""
    s3 = cluster.clients
    s3[0].put_bucket_versioning(Bucket=cbucket, VersioningConfiguration={"Status": "Enabled"})
    keys = [cluster.key_owned_by(node, cbucket, prefix=f"v{node}") for node in range(3)]
    written: dict[str, list[str]] = {key: [] for key in keys}
    for round_ in range(3):
        for i, key in enumerate(keys):
            put = s3[(i + round_) % 3].put_object(Bucket=cbucket, Key=key, Body=b"%d" % round_)
            written[key].insert(0, put["VersionId"])  # newest first
    marker = s3[1].delete_object(Bucket=cbucket, Key=keys[2])
    assert marker["DeleteMarker"] and all(cluster.status(n)["dirty_objects"] for n in range(3))
    for client in s3:
        pages = client.get_paginator("list_object_versions").paginate(
            Bucket=cbucket, PaginationConfig={"PageSize": 4})
        versions = [(v["Key"], v["VersionId"], v["IsLatest"])
                    for page in pages for v in page.get("Versions", [])]
        assert versions == [(key, vid, n == 0 and key != keys[2])
                            for key in sorted(keys) for n, vid in enumerate(written[key])]
        markers = [(m["Key"], m["VersionId"], m["IsLatest"]) for page in client.get_paginator(
            "list_object_versions").paginate(Bucket=cbucket) for m in page.get("DeleteMarkers", [])]
        assert markers == [(keys[2], marker["VersionId"], True)]
        assert client.get_object(Bucket=cbucket, Key=keys[0], VersionId=written[keys[0]][-1])[
            "Body"].read() == b"0"


def test_bucket_settings_changed_anywhere_apply_everywhere_at_once(
        cluster: Cluster, cbucket: str) -> None:
    first, second, third = cluster.clients
    for _ in range(2):  # each member has read (and cached) the settings before they change
        for client in cluster.clients:
            client.get_bucket_versioning(Bucket=cbucket)
        first.put_bucket_versioning(Bucket=cbucket,
                                    VersioningConfiguration={"Status": "Enabled"})
        assert second.put_object(Bucket=cbucket, Key="k", Body=b"1")["VersionId"] != "null"
        third.put_bucket_versioning(Bucket=cbucket,
                                    VersioningConfiguration={"Status": "Suspended"})
        suspended = first.put_object(Bucket=cbucket, Key="k", Body=b"2")
        assert suspended.get("VersionId", "null") == "null"
        assert second.get_bucket_versioning(Bucket=cbucket)["Status"] == "Suspended"
    tags = {"TagSet": [{"Key": "project", "Value": "climate"}]}
    with pytest.raises(ClientError):
        third.get_bucket_tagging(Bucket=cbucket)  # none yet, now cached as none
    first.put_bucket_tagging(Bucket=cbucket, Tagging=tags)
    assert third.get_bucket_tagging(Bucket=cbucket)["TagSet"] == tags["TagSet"]
    second.delete_bucket_tagging(Bucket=cbucket)
    with pytest.raises(ClientError):
        first.get_bucket_tagging(Bucket=cbucket)
