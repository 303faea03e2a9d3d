"""Every key operation runs on the key's owner: versioned writes of one key sent through
every member at once leave a version history that some serial order of the
acknowledged operations gives (docs/cluster.md, "Which member runs what")."""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import threading
import urllib.parse
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from gateway.cluster.bodyseal import body_key
from gateway.cluster.peerauth import HEADER
from tests.gateway.cluster.conftest import SECRET, Cluster

ROUNDS = 30


class History:
    """What the clients were told: acknowledged versions, markers and removals."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bodies: dict[str, bytes] = {}  # version id -> body of an acknowledged PUT
        self.markers: set[str] = set()
        self.removed: set[str] = set()
        self.errors: list[str] = []

    def expected(self) -> set[str]:
        return (set(self.bodies) | self.markers) - self.removed

    def pick(self, rng: random.Random) -> str | None:
        with self.lock:
            live = sorted(set(self.bodies) - self.removed)
        return rng.choice(live) if live else None


def _run(workers: list[Callable[[], None]], history: History) -> None:
    def guarded(work: Callable[[], None]) -> None:
        try:
            work()
        except Exception as exc:  # noqa: BLE001 - reported below, every failure counts
            with history.lock:
                history.errors.append(repr(exc))

    threads = [threading.Thread(target=guarded, args=(w,)) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert history.errors == []


def _versions(client: Any, bucket: str, key: str) -> list[tuple[str, bool, bool]]:
    """(version id, is a delete marker, is latest) of ``key``, newest first."""
    found: list[tuple[str, bool, bool]] = []
    for page in client.get_paginator("list_object_versions").paginate(
            Bucket=bucket, Prefix=key, PaginationConfig={"PageSize": 7}):
        for name, marker in (("Versions", False), ("DeleteMarkers", True)):
            ids = [e["VersionId"] for e in page.get(name, []) if e["Key"] == key]
            assert ids == sorted(ids, reverse=True), "versions are not listed newest first"
            found.extend((e["VersionId"], marker, e["IsLatest"])
                         for e in page.get(name, []) if e["Key"] == key)
    return sorted(found, reverse=True)  # ids sort by the time they were made


@pytest.mark.parametrize("single_deletes", [False, True], ids=["DeleteObjects", "DeleteObject"])
def test_versioned_writes_of_one_key_through_every_member(
        cluster: Cluster, cbucket: str, single_deletes: bool) -> None:
    s3 = cluster.clients
    s3[0].put_bucket_versioning(Bucket=cbucket, VersioningConfiguration={"Status": "Enabled"})
    key = cluster.key_owned_by(0, cbucket, "contended")
    others = [cluster.key_owned_by(n, cbucket, f"other{n}") for n in (1, 2)]
    history = History()

    def put_through(member: int) -> Callable[[], None]:
        def work() -> None:
            for n in range(ROUNDS):
                body = f"member {member} put {n}".encode()
                version = s3[member].put_object(Bucket=cbucket, Key=key, Body=body)["VersionId"]
                with history.lock:
                    history.bodies[version] = body
        return work

    def delete_through(member: int) -> Callable[[], None]:
        rng = random.Random(member)

        def work() -> None:
            for n in range(ROUNDS):
                target = history.pick(rng) if n % 3 == 2 else None
                if single_deletes:
                    args = {} if target is None else {"VersionId": target}
                    answer = s3[member].delete_object(Bucket=cbucket, Key=key, **args)
                    deleted = [{"Key": key, **answer}]
                else:
                    item = {"Key": key} if target is None else {"Key": key, "VersionId": target}
                    # keys owned by every member in one request, the contended one between
                    answer = s3[member].delete_objects(Bucket=cbucket, Delete={
                        "Objects": [{"Key": others[0]}, item, {"Key": others[1]}]})
                    assert answer.get("Errors", []) == []
                    deleted = answer["Deleted"]
                    assert [d["Key"] for d in deleted] == [others[0], key, others[1]]
                mine = deleted[0] if single_deletes else deleted[1]
                with history.lock:
                    if target is not None:
                        assert mine["VersionId"] == target
                        history.removed.add(target)
                    else:
                        assert mine["DeleteMarker"]
                        history.markers.add(mine["DeleteMarkerVersionId" if not single_deletes
                                                  else "VersionId"])
        return work

    _run([put_through(0), put_through(0), delete_through(1), delete_through(2)], history)

    expected = history.expected()
    listings = [_versions(client, cbucket, key) for client in s3]
    assert listings[1:] == listings[:-1], "members list different histories"
    listed = listings[0]
    ids = [vid for vid, _, _ in listed]
    assert len(ids) == len(set(ids)), "a version is listed twice"
    assert set(ids) == expected, (
        f"acknowledged versions missing: {sorted(expected - set(ids))}; "
        f"versions that should be gone: {sorted(set(ids) - expected)}")
    assert [latest for _, _, latest in listed] == [True] + [False] * (len(listed) - 1)
    newest, newest_is_marker, _ = listed[0]
    assert newest_is_marker == (newest in history.markers)
    for client in s3:
        if newest_is_marker:
            with pytest.raises(ClientError, match="NoSuchKey"):
                client.get_object(Bucket=cbucket, Key=key)
        else:
            got = client.get_object(Bucket=cbucket, Key=key)
            assert (got["VersionId"], got["Body"].read()) == (newest, history.bodies[newest])
    for vid in sorted(set(history.bodies) & expected):
        got = s3[2].get_object(Bucket=cbucket, Key=key, VersionId=vid)
        assert got["Body"].read() == history.bodies[vid]


def _peer_post(cluster: Cluster, target: int, operation: str, params: dict[str, str],
               body: bytes, key: str = "") -> httpx.Response:
    """A peer call to the member of host ``target`` serving ``key`` there, signed as
    a member would sign it."""
    path = f"/_squall/peer/{operation}"
    query = urllib.parse.urlencode(params, quote_via=urllib.parse.quote)
    worker = cluster.serving_member(target, params["bucket"], key)
    marker = cluster.sign(target, "POST", path.encode(), query.encode(), worker=worker)
    tag = hmac.new(body_key(SECRET.encode(), marker), body, hashlib.sha256).digest()
    return httpx.post(f"{cluster.nodes[target].endpoint}{path}?{query}", content=body + tag,
                      headers={HEADER: marker})


def test_each_owner_deletes_only_its_own_keys(cluster: Cluster, cbucket: str) -> None:
    """The peer call behind a split DeleteObjects: refused when malformed, per key when
    the key is not the receiver's, answered in order."""
    s3 = cluster.clients
    s3[0].put_bucket_versioning(Bucket=cbucket, VersioningConfiguration={"Status": "Enabled"})
    mine = cluster.key_owned_by(0, cbucket, "mine")
    theirs = cluster.key_owned_by(1, cbucket, "theirs")
    put = s3[1].put_object(Bucket=cbucket, Key=mine, Body=b"x")
    s3[1].put_object(Bucket=cbucket, Key=theirs, Body=b"y")
    for body in (b"not json", b'{"key": "k"}', b'[{"key": 7}]', b"[" + b" " * (5 << 20) + b"]"):
        refused = _peer_post(cluster, 0, "delete-objects", {"bucket": cbucket}, body, mine)
        assert refused.status_code == 400, body[:20]
        assert json.loads(refused.headers["x-squall-error"])["type"] == "InvalidArgument"
    items = [{"key": theirs, "version_id": None}, {"key": mine, "version_id": None},
             {"key": mine, "version_id": "bad id"},
             {"key": mine, "version_id": put["VersionId"]}]
    answer = _peer_post(cluster, 0, "delete-objects", {"bucket": cbucket},
                        json.dumps(items).encode(), mine)
    assert answer.status_code == 200, answer.headers
    results = answer.json()
    assert [r.get("error", {}).get("type") for r in results] == \
        ["ViewChanged", None, "InvalidVersionId", None]
    assert results[1]["delete_marker"] is True
    assert results[3] == {"version_id": put["VersionId"], "delete_marker": False}
    # the key member 0 did not own is untouched; its own key has just the marker left
    assert s3[2].get_object(Bucket=cbucket, Key=theirs)["Body"].read() == b"y"
    listed = s3[2].list_object_versions(Bucket=cbucket, Prefix=mine)
    assert "Versions" not in listed
    assert [m["VersionId"] for m in listed["DeleteMarkers"]] == [results[1]["version_id"]]
    unsigned = httpx.post(f"{cluster.nodes[0].endpoint}/_squall/peer/delete-objects"
                          f"?bucket={cbucket}", content=json.dumps(items).encode())
    assert unsigned.status_code == 403
