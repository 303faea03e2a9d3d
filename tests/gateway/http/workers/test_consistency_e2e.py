"""Through the one port of a 2-worker gateway: read-after-write and list-after-write, for
keys of both workers, whichever worker each connection reached."""

from __future__ import annotations

import os
import random
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.gateway.http.workers.conftest import keys_of, owner, workers_status
from tests.support.server import SquallProcess

TRIALS = 200


def _keys(client: Any, bucket: str, **kwargs: Any) -> list[str]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, **kwargs)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def _forwarded(server: SquallProcess) -> dict[tuple[str, str], float]:
    """(receiving worker, owner) -> requests forwarded, from the merged metrics."""
    found: dict[tuple[str, str], float] = {}
    for line in httpx.get(f"{server.endpoint}/_squall/metrics").text.splitlines():
        if line.startswith("squall_cluster_forwarded_requests_total{"):
            labels = dict(part.split("=") for part in line[line.index("{") + 1:
                                                             line.index("}")].split(","))
            found[(labels["worker"].strip('"'), labels["node"].strip('"'))] = float(
                line.rsplit(" ", 1)[1])
    return found


def test_write_then_read_and_list_at_once(gateway: SquallProcess, clients: list[Any],
                                          wbucket: str) -> None:
    rng = random.Random(11)
    expected: dict[str, bytes] = {}
    problems: list[str] = []
    for trial in range(TRIALS):
        writer, reader = rng.sample(clients, 2)
        if expected and trial % 5 == 4:
            key = rng.choice(sorted(expected))
            writer.delete_object(Bucket=wbucket, Key=key)
            del expected[key]
            with pytest.raises(ClientError) as err:
                reader.head_object(Bucket=wbucket, Key=key)
            if err.value.response["Error"]["Code"] != "404":
                problems.append(f"{key}: deleted but HEAD says {err.value}")
            if key in _keys(reader, wbucket, Prefix=key):
                problems.append(f"{key}: deleted but still listed")
            continue
        key = rng.choice(sorted(expected)) if expected and trial % 3 == 2 \
            else f"d{trial % 7}/k{trial}"
        body = os.urandom(rng.randint(0, 4096))
        writer.put_object(Bucket=wbucket, Key=key, Body=body)
        expected[key] = body
        if reader.get_object(Bucket=wbucket, Key=key)["Body"].read() != body:
            problems.append(f"{key}: stale read")
        listed = reader.list_objects_v2(Bucket=wbucket, Prefix=key)
        if {o["Key"]: o["Size"] for o in listed.get("Contents", [])}.get(key) != len(body):
            problems.append(f"{key}: missing or stale in a listing")
    assert problems == []
    assert {owner(wbucket, k) for k in expected} == {0, 1}
    # Nothing reached the backend: both workers' caches hold the keys they own.
    assert all(w["dirty_objects"] > 0 for w in workers_status(gateway))
    for client in clients:
        assert _keys(client, wbucket) == sorted(expected)
        assert _keys(client, wbucket, PaginationConfig={"PageSize": 7}) == sorted(expected)
        folders = client.list_objects_v2(Bucket=wbucket, Delimiter="/")
        assert [p["Prefix"] for p in folders["CommonPrefixes"]] == [f"d{i}/" for i in range(7)]
    # Requests reached a worker that does not own their key and were forwarded or their
    # connection handed over (which worker accepts a connection is the kernel's choice:
    # one of them may get them all).
    forwarded = _forwarded(gateway)
    handed = sum(w["worker"].get("handover", {}).get("sent", 0)
                 for w in workers_status(gateway))
    assert sum(forwarded.values()) + handed > 0, forwarded


def test_overwrites_are_never_stale(clients: list[Any], wbucket: str) -> None:
    rng = random.Random(5)
    keys = keys_of(0, wbucket, 2) + keys_of(1, wbucket, 2)
    for round_ in range(25):
        for key in keys:
            body = f"{key} version {round_} ".encode() * rng.randint(1, 200)
            rng.choice(clients).put_object(Bucket=wbucket, Key=key, Body=body)
            for client in clients:
                assert client.get_object(Bucket=wbucket, Key=key)["Body"].read() == body


def test_multipart_upload_through_the_port(clients: list[Any], wbucket: str) -> None:
    for key in (keys_of(0, wbucket, 1, "mpu")[0], keys_of(1, wbucket, 1, "mpu")[0]):
        upload = clients[0].create_multipart_upload(Bucket=wbucket, Key=key)["UploadId"]
        listed = clients[1].list_multipart_uploads(Bucket=wbucket).get("Uploads", [])
        assert upload in [u["UploadId"] for u in listed]
        parts, data = [], b""
        for number in range(1, 5):
            body = os.urandom(2048 + number)
            client = clients[number % len(clients)]
            etag = client.upload_part(Bucket=wbucket, Key=key, UploadId=upload,
                                      PartNumber=number, Body=body)["ETag"]
            parts.append({"PartNumber": number, "ETag": etag})
            data += body
        got = clients[2].list_parts(Bucket=wbucket, Key=key, UploadId=upload)["Parts"]
        assert [p["PartNumber"] for p in got] == [1, 2, 3, 4]
        clients[3].complete_multipart_upload(Bucket=wbucket, Key=key, UploadId=upload,
                                             MultipartUpload={"Parts": parts})
        for client in clients:
            assert client.get_object(Bucket=wbucket, Key=key)["Body"].read() == data
        assert key in _keys(clients[1], wbucket)
        assert clients[2].list_multipart_uploads(Bucket=wbucket).get("Uploads", []) == []


def test_delete_objects(clients: list[Any], wbucket: str) -> None:
    keys = [f"del/{i:03d}" for i in range(40)]
    for i, key in enumerate(keys):
        clients[i % len(clients)].put_object(Bucket=wbucket, Key=key, Body=key.encode())
    doomed = keys[::2]
    assert {owner(wbucket, k) for k in doomed} == {0, 1}
    answer = clients[1].delete_objects(Bucket=wbucket, Delete={
        "Objects": [{"Key": k} for k in doomed]})
    assert sorted(d["Key"] for d in answer["Deleted"]) == doomed
    assert answer.get("Errors", []) == []
    for client in clients:
        assert _keys(client, wbucket, Prefix="del/") == keys[1::2]
    for key in doomed:
        with pytest.raises(ClientError) as err:
            clients[2].get_object(Bucket=wbucket, Key=key)
        assert err.value.response["Error"]["Code"] == "NoSuchKey"


def test_versioning(clients: list[Any], wbucket: str) -> None:
    clients[0].put_bucket_versioning(Bucket=wbucket,
                                     VersioningConfiguration={"Status": "Enabled"})
    for client in clients:
        status = client.get_bucket_versioning(Bucket=wbucket)
        assert status["Status"] == "Enabled"
    keys = keys_of(0, wbucket, 3, "v") + keys_of(1, wbucket, 3, "v")
    versions: dict[str, list[tuple[str, bytes]]] = {k: [] for k in keys}
    for round_ in range(3):
        for i, key in enumerate(keys):
            body = f"{key}:{round_}".encode()
            put = clients[(i + round_) % len(clients)].put_object(Bucket=wbucket, Key=key,
                                                                  Body=body)
            assert put["VersionId"] != "null"
            versions[key].append((put["VersionId"], body))
    listed = clients[2].list_object_versions(Bucket=wbucket)
    seen = {(v["Key"], v["VersionId"]): v["IsLatest"] for v in listed["Versions"]}
    assert len(seen) == 3 * len(keys)
    for key, made in versions.items():
        for n, (version, body) in enumerate(made):
            assert seen[(key, version)] is (n == len(made) - 1)
            got = clients[n % len(clients)].get_object(Bucket=wbucket, Key=key,
                                                       VersionId=version)
            assert got["Body"].read() == body
    key = keys[-1]
    marker = clients[1].delete_object(Bucket=wbucket, Key=key)
    assert marker["DeleteMarker"] is True
    with pytest.raises(ClientError):
        clients[3].get_object(Bucket=wbucket, Key=key)
    listed = clients[0].list_object_versions(Bucket=wbucket, Prefix=key)
    assert [m["VersionId"] for m in listed["DeleteMarkers"]] == [marker["VersionId"]]
    assert clients[2].get_object(Bucket=wbucket, Key=key, VersionId=versions[key][0][0])[
        "Body"].read() == versions[key][0][1]


def test_admin_views_name_the_worker(gateway: SquallProcess) -> None:
    health = httpx.get(f"{gateway.endpoint}/_squall/health")
    assert health.status_code == 200
    assert health.json()["worker"] in (0, 1)
    assert [w["status"] for w in health.json()["workers"]] == ["up", "up"]
    status = httpx.get(f"{gateway.endpoint}/_squall/status").json()
    assert status["worker"]["id"] in (0, 1) and status["worker"]["count"] == 2
    assert status["cluster"]["members"] == 2
    # the gateway's throttle, of which each worker holds half
    assert status["backend_throttle"]["bandwidth_bytes_per_s"] == 2
    every = workers_status(gateway)
    assert [w["worker"]["id"] for w in every] == [0, 1]
    assert [w["backend_throttle"]["bandwidth_bytes_per_s"] for w in every] == [1, 1]
    assert len({w["worker"]["pid"] for w in every}) == 2
    metrics = httpx.get(f"{gateway.endpoint}/_squall/metrics").text
    assert 'squall_worker_up{worker="0"} 1.0' in metrics
    assert 'squall_worker_up{worker="1"} 1.0' in metrics
    assert 'worker="0"' in metrics.split("squall_worker_up")[0]
    ring = httpx.get(f"{gateway.endpoint}/_squall/cluster").json()
    assert ring["members"] == []  # one gateway to clients: nothing to route to
