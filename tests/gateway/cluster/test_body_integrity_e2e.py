"""Peer request bodies carry a keyed tag: a body changed in flight is refused (400
BadDigest) and nothing is stored; the right tag is accepted. Real members, hand-made
peer requests signed with the cluster secret (the fault is a real tampered request)."""

from __future__ import annotations

import hashlib
import hmac
import json
import urllib.parse

import httpx
import pytest

from gateway.cluster.bodyseal import TAG_BYTES, body_key
from gateway.cluster.peerauth import HEADER
from tests.gateway.cluster.conftest import SECRET, Cluster


def _peer_put(cluster: Cluster, node: int, bucket: str, key: str, body: bytes,
              tamper: bool) -> httpx.Response:
    path = b"/_squall/peer/object"
    query = urllib.parse.urlencode({"bucket": bucket, "key": key},
                                   quote_via=urllib.parse.quote).encode()
    marker = cluster.sign(node, "PUT", path, query)
    tag = hmac.new(body_key(SECRET.encode(), marker), body, hashlib.sha256).digest()
    sent = bytearray(body)
    if tamper:
        sent[len(sent) // 2] ^= 0x01
    meta = {"content_type": "application/octet-stream"}
    return httpx.put(f"{cluster.urls[node]}{path.decode()}?{query.decode()}",
                     content=bytes(sent) + tag,
                     headers={HEADER: marker, "x-squall-meta": json.dumps(meta)})


@pytest.mark.parametrize("tamper", [True, False])
def test_a_tampered_peer_body_is_refused(cluster: Cluster, cbucket: str,
                                         tamper: bool) -> None:
    owner = 1
    key = cluster.key_owned_by(owner, cbucket, prefix=f"seal-{tamper}")
    body = bytes(range(256)) * 400
    answer = _peer_put(cluster, owner, cbucket, key, body, tamper)
    s3 = cluster.clients[2]
    if tamper:
        assert answer.status_code == 400, answer.headers
        assert json.loads(answer.headers["x-squall-error"])["type"] == "BadDigest"
        with pytest.raises(s3.exceptions.ClientError) as info:
            s3.head_object(Bucket=cbucket, Key=key)
        assert info.value.response["Error"]["Code"] == "404"
    else:
        assert answer.status_code == 200, answer.headers
        assert s3.get_object(Bucket=cbucket, Key=key)["Body"].read() == body


def test_a_peer_body_without_its_tag_is_refused(cluster: Cluster, cbucket: str) -> None:
    key = cluster.key_owned_by(1, cbucket, prefix="untagged")
    path = b"/_squall/peer/object"
    query = urllib.parse.urlencode({"bucket": cbucket, "key": key}).encode()
    answer = httpx.put(f"{cluster.urls[1]}{path.decode()}?{query.decode()}",
                       content=b"x" * (TAG_BYTES - 1),
                       headers={HEADER: cluster.sign(1, "PUT", path, query)})
    assert answer.status_code == 400


def test_forwarded_uploads_pass_the_check(cluster: Cluster, cbucket: str) -> None:
    """Uploads through a non-owner (sized and chunked bodies) arrive intact."""
    s3 = cluster.clients[0]
    key = cluster.key_owned_by(2, cbucket, prefix="fwd")
    body = b"forwarded body " * 5000
    s3.put_object(Bucket=cbucket, Key=key, Body=body)
    assert cluster.clients[1].get_object(Bucket=cbucket, Key=key)["Body"].read() == body
    s3.put_object(Bucket=cbucket, Key=key + "-empty", Body=b"")
    assert s3.head_object(Bucket=cbucket, Key=key + "-empty")["ContentLength"] == 0
