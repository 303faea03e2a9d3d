"""Requests for keys another member owns are relayed to the owner as bytes
(gateway/cluster/relay.py): real members, real clients (boto3, and raw HTTP/1.1 where the
exchange itself is what is checked: Expect, keep-alive, Connection: close)."""

from __future__ import annotations

import http.client
import os
import urllib.parse

import boto3
import httpx
import pytest
from botocore.config import Config

from gateway.client.credentials import Credentials
from gateway.client.sigv4 import Signer, object_path
from gateway.cluster.relay import ASK_FIRST_BYTES
from tests.gateway.cluster.conftest import Cluster
from tests.support.server import ACCESS_KEY, SECRET_KEY


def _raw(cluster: Cluster, node: int) -> http.client.HTTPConnection:
    url = urllib.parse.urlsplit(cluster.nodes[node].endpoint)
    return http.client.HTTPConnection(url.hostname, url.port, timeout=30)


def _signed(cluster: Cluster, node: int, method: str, bucket: str, key: str,
            body: bytes = b"", secret: str = SECRET_KEY) -> dict[str, str]:
    signer = Signer(Credentials(ACCESS_KEY, secret))
    return signer.sign(method, cluster.nodes[node].endpoint + object_path(bucket, key),
                       None, body)


def test_objects_through_a_non_owner_are_the_owners(cluster: Cluster, cbucket: str) -> None:
    """PUT, GET (whole, a range), HEAD and DELETE of keys owned elsewhere: what the
    client gets is what the owner answers, and every one of them was passed on."""
    key = cluster.key_owned_by(2, cbucket, prefix="relay")
    via, owner = cluster.clients[0], cluster.clients[2]
    before = cluster.forwarded()
    body = os.urandom(3000)
    put = via.put_object(Bucket=cbucket, Key=key, Body=body, Metadata={"a": "b"})
    direct = owner.head_object(Bucket=cbucket, Key=key)
    relayed = via.head_object(Bucket=cbucket, Key=key)
    assert put["ETag"] == direct["ETag"] == relayed["ETag"]
    assert relayed["ContentLength"] == 3000 and relayed["Metadata"] == {"a": "b"}
    assert via.get_object(Bucket=cbucket, Key=key)["Body"].read() == body
    assert via.get_object(Bucket=cbucket, Key=key, Range="bytes=10-19")["Body"].read() \
        == body[10:20]
    via.delete_object(Bucket=cbucket, Key=key)
    with pytest.raises(via.exceptions.NoSuchKey):  # the owner's error, body and all
        via.get_object(Bucket=cbucket, Key=key)
    assert cluster.forwarded() - before == 6


@pytest.mark.parametrize("size", [ASK_FIRST_BYTES + 1, 6 << 20])
def test_large_bodies_both_ways(cluster: Cluster, cbucket: str, size: int) -> None:
    """Uploads above the size the relay asks the owner about first (boto3 sends its
    own Expect), and a download of several socket buffers, arrive whole."""
    key = cluster.key_owned_by(1, cbucket, prefix=f"big-{size}")
    body = os.urandom(size)
    cluster.clients[2].put_object(Bucket=cbucket, Key=key, Body=body)
    assert cluster.clients[0].get_object(Bucket=cbucket, Key=key)["Body"].read() == body
    assert cluster.clients[1].get_object(Bucket=cbucket, Key=key)["Body"].read() == body


def test_expect_continue_waits_for_the_owner(cluster: Cluster, cbucket: str) -> None:
    """A client that sends ``Expect: 100-continue`` gets "100 Continue" once the owner
    takes the body, and the owner's refusal (a bad signature) before it sends the body;
    nothing is stored, and the connection serves the next request."""
    key = cluster.key_owned_by(2, cbucket, prefix="expect")
    body = b"x" * (ASK_FIRST_BYTES * 2)
    connection = _raw(cluster, 0)
    try:
        for secret, wanted in ((SECRET_KEY + "wrong", 403), (SECRET_KEY, 200)):
            headers = _signed(cluster, 0, "PUT", cbucket, key, body, secret)
            headers["Expect"] = "100-continue"
            headers["Content-Length"] = str(len(body))
            connection.putrequest("PUT", object_path(cbucket, key),
                                  skip_accept_encoding=True)
            for name, value in headers.items():
                connection.putheader(name, value)
            connection.endheaders()
            if wanted == 200:
                connection.send(body)
            answer = connection.getresponse()
            text = answer.read()
            assert answer.status == wanted, text
            if wanted == 403:
                assert b"SignatureDoesNotMatch" in text
                with pytest.raises(cluster.clients[2].exceptions.ClientError):
                    cluster.clients[2].head_object(Bucket=cbucket, Key=key)
                connection.close()
                connection = _raw(cluster, 0)
    finally:
        connection.close()
    assert cluster.clients[2].get_object(Bucket=cbucket, Key=key)["Body"].read() == body


def test_keep_alive_and_connection_close(cluster: Cluster, cbucket: str) -> None:
    """Many relayed requests on one kept-alive client connection; a request that asks
    for ``Connection: close`` gets its answer, then the close."""
    keys = [cluster.key_owned_by(1, cbucket, prefix=f"ka{i}") for i in range(3)]
    for key in keys:
        cluster.clients[1].put_object(Bucket=cbucket, Key=key, Body=key.encode())
    connection = _raw(cluster, 0)
    try:
        for _ in range(5):
            for key in keys:
                connection.request("GET", object_path(cbucket, key),
                                   headers=_signed(cluster, 0, "GET", cbucket, key))
                answer = connection.getresponse()
                assert (answer.status, answer.read()) == (200, key.encode())
        headers = _signed(cluster, 0, "HEAD", cbucket, keys[0])
        headers["Connection"] = "close"
        connection.request("HEAD", object_path(cbucket, keys[0]), headers=headers)
        answer = connection.getresponse()
        assert answer.status == 200 and answer.getheader("Content-Length") == \
            str(len(keys[0]))
        answer.read()
        assert answer.will_close
    finally:
        connection.close()


def test_an_unreachable_owner_is_a_503(tmp_path, etcd) -> None:  # type: ignore[no-untyped-def]
    """A relay to an owner that does not answer: 503 ServiceUnavailable with the
    member's name, and the other keys still served."""
    small = Cluster(tmp_path, size=2, coordinator=etcd.url).start()
    try:
        bucket = "relay-down"
        small.clients[0].create_bucket(Bucket=bucket)
        lost = small.key_owned_by(1, bucket, prefix="lost")
        kept = small.key_owned_by(0, bucket, prefix="kept")
        small.clients[0].put_object(Bucket=bucket, Key=kept, Body=b"kept")
        small.nodes[1].kill()
        client = boto3.client("s3", endpoint_url=small.nodes[0].endpoint,
                              aws_access_key_id=ACCESS_KEY,
                              aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
                              config=Config(retries={"max_attempts": 1},
                                            s3={"addressing_style": "path"}))
        with pytest.raises(client.exceptions.ClientError) as info:
            client.get_object(Bucket=bucket, Key=lost)
        assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
        assert client.get_object(Bucket=bucket, Key=kept)["Body"].read() == b"kept"
    finally:
        for node in small.nodes:
            node.stop()


def test_a_refused_large_upload_without_expect(cluster: Cluster, cbucket: str) -> None:
    """A client that sends a large body at once (no Expect): the relay asks the owner
    first, passes on its refusal, and nothing is stored; the member serves on."""
    key = cluster.key_owned_by(2, cbucket, prefix="refused")
    body = os.urandom(ASK_FIRST_BYTES * 3)
    headers = _signed(cluster, 0, "PUT", cbucket, key, body, SECRET_KEY + "wrong")
    answer = httpx.put(cluster.nodes[0].endpoint + object_path(cbucket, key),
                       content=body, headers=headers, timeout=30)
    assert answer.status_code == 403 and b"SignatureDoesNotMatch" in answer.content
    with pytest.raises(cluster.clients[2].exceptions.ClientError):
        cluster.clients[2].head_object(Bucket=cbucket, Key=key)
    cluster.clients[0].put_object(Bucket=cbucket, Key=key, Body=body)
    assert cluster.clients[1].get_object(Bucket=cbucket, Key=key)["Body"].read() == body


def test_a_client_that_leaves_mid_download(cluster: Cluster, cbucket: str) -> None:
    """A client that closes its connection in the middle of a large relayed answer:
    the member stops reading the owner and serves the next requests."""
    key = cluster.key_owned_by(1, cbucket, prefix="left")
    body = os.urandom(16 << 20)
    cluster.clients[1].put_object(Bucket=cbucket, Key=key, Body=body)
    for _ in range(3):
        connection = _raw(cluster, 0)
        connection.request("GET", object_path(cbucket, key),
                           headers=_signed(cluster, 0, "GET", cbucket, key))
        answer = connection.getresponse()
        assert answer.status == 200 and len(answer.read(1 << 16)) == 1 << 16
        connection.close()
    assert cluster.clients[0].get_object(Bucket=cbucket, Key=key)["Body"].read() == body
