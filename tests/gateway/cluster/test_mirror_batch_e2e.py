"""Bad mirror batches: a malformed body is refused whole (400 InvalidArgument); copies
of keys the sender does not own are each refused (ViewChanged) and none is kept. Real
members, hand-made peer requests signed with the cluster secret as member 0."""

from __future__ import annotations

import hashlib
import hmac
import json

import httpx

from gateway.cluster import wire
from gateway.cluster.bodyseal import body_key
from gateway.cluster.peerauth import HEADER
from tests.gateway.cluster.conftest import SECRET, Cluster

PATH = b"/_squall/peer/mirror-batch"


def _send(cluster: Cluster, node: int, body: bytes) -> httpx.Response:
    marker = cluster.sign(node, "PUT", PATH, b"")
    tag = hmac.new(body_key(SECRET.encode(), marker), body, hashlib.sha256).digest()
    return httpx.put(f"{cluster.urls[node]}{PATH.decode()}", content=body + tag,
                     headers={HEADER: marker})


def test_a_malformed_batch_is_refused_whole(cluster: Cluster) -> None:
    short = b'[{"bucket": "b", "key": "k", "epoch": 1, "seq": 1, "info": null, "size": 9}]\n'
    for body in (b"not json\n", short + b"short"):
        answer = _send(cluster, 1, body)
        assert answer.status_code == 400
        assert json.loads(answer.headers["x-squall-error"])["type"] == "InvalidArgument"


def test_copies_of_keys_the_sender_does_not_own_are_each_refused(cluster: Cluster,
                                                                 cbucket: str) -> None:
    keys = [cluster.key_owned_by(owner, cbucket, prefix=f"notmine{owner}")
            for owner in (1, 2)]
    held = cluster.view(1)["mirror_copies"]
    copies = [wire.MirrorCopy(cbucket, key, 1, 1, None, b"") for key in keys]
    answer = _send(cluster, 1, wire.copies_to(copies))
    assert answer.status_code == 200
    assert [item["type"] for item in answer.json()] == ["ViewChanged", "ViewChanged"]
    assert cluster.view(1)["mirror_copies"] == held
