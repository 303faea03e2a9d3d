"""The light PutObject, UploadPart, HeadObject, ranged GetObject and ListObjectsV2 path of
the mount's store: what it stores, reads and lists is what boto3 stores, reads and lists,
and every failure is decided as before (same typed errors, same errno)."""

from __future__ import annotations

import errno
import os
import socket
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from xml.etree import ElementTree

import pytest

from backends.core import errors as se
from gateway.client.credentials import Credentials
from gateway.fuse_mount.errors import errno_for
from gateway.fuse_mount.light import MISSING, LightRequests, _list_page
from gateway.fuse_mount.routing import OwnerRouter
from gateway.fuse_mount.store import BucketClient, Part, _crc32c
from gateway.protocol import errors as pe
from tests.gateway.cluster.conftest import Cluster
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

KEYS = ["plain.txt", "dir/with space+plus%percent.bin", "unicodé/ключ ~tilde", "a=b&c?d#e"]


def light(endpoint: str, bucket: str, secret: str = SECRET_KEY) -> LightRequests:
    return LightRequests(endpoint, bucket, Credentials(ACCESS_KEY, secret), region="us-east-1",
                         pool_size=4, connect_timeout=2, read_timeout=10)


@pytest.mark.parametrize("key", KEYS)
def test_light_put_stores_body_metadata_and_etag_like_boto3(
        squall: SquallProcess, s3, bucket: str, key: str) -> None:
    body = bytearray(uuid.uuid4().bytes * 100)
    etag = light(squall.endpoint, bucket).put(key, body, {"mode": "33188", "mtime": "17"},
                                              _crc32c(body))
    assert etag is not None
    got = s3.get_object(Bucket=bucket, Key=key)
    assert got["Body"].read() == body
    assert got["ETag"] == etag
    assert got["Metadata"] == {"mode": "33188", "mtime": "17"}
    boto3_store = BucketClient(squall.endpoint, bucket,
                               Credentials(ACCESS_KEY, SECRET_KEY), light_requests=False)
    light_store = BucketClient(squall.endpoint, bucket,
                               Credentials(ACCESS_KEY, SECRET_KEY))
    assert light_store.head(key) == boto3_store.head(key)


def test_light_put_of_an_empty_body(squall: SquallProcess, s3, bucket: str) -> None:
    assert light(squall.endpoint, bucket).put("empty/", b"", {}, _crc32c(b"")) is not None
    assert s3.head_object(Bucket=bucket, Key="empty/")["ContentLength"] == 0


def test_light_put_declines_what_it_does_not_send(squall: SquallProcess, s3,
                                                   bucket: str) -> None:
    """Errors and non-ASCII metadata: None (the caller goes through boto3); a bad
    checksum is refused by the gateway and nothing is stored."""
    put = light(squall.endpoint, bucket)
    assert put.put("k", b"data", {"name": "é"}, _crc32c(b"data")) is None
    assert put.put("k", b"data", {}, _crc32c(b"other")) is None
    assert light(squall.endpoint, bucket, secret="wrong").put(
        "k", b"data", {}, _crc32c(b"data")) is None
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
    assert put.head("k") == MISSING
    assert light(squall.endpoint, bucket, secret="wrong").head("k") is None


def test_store_head_of_a_missing_key_is_no_such_key(squall: SquallProcess,
                                                    bucket: str) -> None:
    store = BucketClient(squall.endpoint, bucket, Credentials(ACCESS_KEY, SECRET_KEY))
    with pytest.raises(se.NoSuchKey) as caught:
        store.head("absent/name")
    assert errno_for(caught.value) == errno.ENOENT


def test_store_put_errors_are_those_of_boto3(squall: SquallProcess, bucket: str) -> None:
    missing = BucketClient(squall.endpoint, f"missing-{uuid.uuid4().hex[:8]}",
                           Credentials(ACCESS_KEY, SECRET_KEY), max_attempts=1)
    with pytest.raises(se.NoSuchBucket) as caught:
        missing.put("k", b"data", {})
    assert errno_for(caught.value) == errno.ENOENT
    wrong = BucketClient(squall.endpoint, bucket, Credentials(ACCESS_KEY, "wrong"),
                         max_attempts=1)
    with pytest.raises(pe.SignatureDoesNotMatch) as denied:
        wrong.put("k", b"data", {})
    assert errno_for(denied.value) == errno.EACCES
    with pytest.raises(pe.AccessDenied) as head_denied:  # a HEAD has no body: its status
        wrong.head("k")
    assert errno_for(head_denied.value) == errno.EACCES


def test_store_put_goes_through_boto3_when_the_light_path_fails(
        squall: SquallProcess, s3, bucket: str) -> None:
    """Fault injected (a dropped connection cannot be produced on demand against the real
    gateway): the light path points at a closed port, boto3 then stores the file."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    store = BucketClient(squall.endpoint, bucket, Credentials(ACCESS_KEY, SECRET_KEY))
    store._light = light(dead, bucket)  # the fault injected
    etag = store.put("retried.txt", b"payload", {"mode": "33188"})
    got = s3.get_object(Bucket=bucket, Key="retried.txt")
    assert (got["Body"].read(), got["ETag"], got["Metadata"]) == (
        b"payload", etag, {"mode": "33188"})
    assert store.head("retried.txt").etag == etag
    with pytest.raises(se.NoSuchKey):
        store.head("absent")


def test_store_without_light_requests(squall: SquallProcess, s3, bucket: str) -> None:
    store = BucketClient(squall.endpoint, bucket, Credentials(ACCESS_KEY, SECRET_KEY),
                         light_requests=False)
    assert store.put("boto3.txt", b"x", {}) == s3.head_object(
        Bucket=bucket, Key="boto3.txt")["ETag"]


@pytest.mark.parametrize("key", KEYS)
def test_light_upload_part_makes_the_part_boto3_makes(squall: SquallProcess, s3, bucket: str,
                                                      key: str) -> None:
    store = BucketClient(squall.endpoint, bucket, Credentials(ACCESS_KEY, SECRET_KEY))
    upload_id = store.create_upload(key, {})
    blocks = [bytearray(os.urandom(5 * 1024 * 1024)), bytearray(b"tail")]
    parts = [light(squall.endpoint, bucket).upload_part(key, upload_id, n, data, _crc32c(data))
             for n, data in enumerate(blocks, start=1)]
    listed = store.list_parts(key, upload_id)
    assert [(p.number, p.etag, p.crc32c) for p in listed] == [
        (n, etag, _crc32c(data))
        for n, (etag, data) in enumerate(zip(parts, blocks, strict=True), start=1)]
    store.complete_upload(key, upload_id, listed)
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"".join(blocks)


def test_light_upload_part_declines_and_the_store_sends_it_through_boto3(
        squall: SquallProcess, s3, bucket: str) -> None:
    """A bad checksum or an unknown upload: None from the light path, and the store's
    errors are boto3's; a closed port (the fault injected: a dropped connection cannot be
    produced on demand against the real gateway) makes the store send the part via boto3."""
    store = BucketClient(squall.endpoint, bucket, Credentials(ACCESS_KEY, SECRET_KEY),
                         max_attempts=1)
    upload_id = store.create_upload("k", {})
    put = light(squall.endpoint, bucket)
    assert put.upload_part("k", upload_id, 1, b"data", _crc32c(b"other")) is None
    assert put.upload_part("k", "no-such-upload-id-000", 1, b"data", _crc32c(b"data")) is None
    assert store.list_parts("k", upload_id) == []
    with pytest.raises(se.NoSuchUpload) as caught:
        store.upload_part("k", "no-such-upload-id-000", 1, b"data")
    assert errno_for(caught.value) == errno.EIO  # the file's upload is gone: its data lost
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    store._light = light(dead, bucket)  # the fault injected
    part = store.upload_part("k", upload_id, 1, b"data")
    store.complete_upload("k", upload_id, [part])
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"data"


# Ranged GETs: the mount's block fetches (get_into) and other reads (get_range).

def _stores(endpoint: str, bucket: str) -> tuple[BucketClient, BucketClient]:
    creds = Credentials(ACCESS_KEY, SECRET_KEY)
    return (BucketClient(endpoint, bucket, creds, max_attempts=1),
            BucketClient(endpoint, bucket, creds, max_attempts=1, light_requests=False))


@pytest.mark.parametrize("key", KEYS)
def test_light_ranged_get_reads_what_boto3_reads(squall: SquallProcess, s3, bucket: str,
                                                 key: str) -> None:
    body = os.urandom(300_000)
    etag = s3.put_object(Bucket=bucket, Key=key, Body=body)["ETag"]
    get = light(squall.endpoint, bucket)
    for start, end in ((0, len(body)), (1, 2), (12_345, 299_999), (299_999, 300_000)):
        into = bytearray(end - start)
        assert get.get_into(key, start, memoryview(into), if_match=etag)
        assert into == body[start:end]
        assert get.get_range(key, start, end, if_match=etag) == body[start:end]
        assert get.get_range(key, start, end, if_match=None) == body[start:end]
    light_store, boto3_store = _stores(squall.endpoint, bucket)
    into = bytearray(100_000)
    light_store.get_into(key, 7, memoryview(into), if_match=etag)
    assert into == body[7:100_007] == boto3_store.get_range(key, 7, 100_007, if_match=etag)


def test_light_ranged_get_declines_every_other_outcome(squall: SquallProcess, s3,
                                                        bucket: str) -> None:
    """412 (another version), 404, 416 (past the end), a wrong signature: None / False,
    and the connection pool still serves the next request."""
    etag = s3.put_object(Bucket=bucket, Key="k", Body=b"0123456789")["ETag"]
    get = light(squall.endpoint, bucket)
    into = memoryview(bytearray(4))
    assert not get.get_into("k", 0, into, if_match='"0123456789abcdef0123456789abcdef"')
    assert get.get_range("k", 0, 4, if_match='"0123456789abcdef0123456789abcdef"') is None
    assert not get.get_into("absent", 0, into, if_match=None)
    assert get.get_range("k", 20, 24, if_match=None) is None
    assert not light(squall.endpoint, bucket, secret="wrong").get_into("k", 0, into,
                                                                       if_match=None)
    assert get.get_into("k", 2, into, if_match=etag) and bytes(into) == b"2345"


def test_store_ranged_get_errors_are_those_of_boto3(squall: SquallProcess, s3,
                                                     bucket: str) -> None:
    """What the light path declines is decided by boto3 exactly as before: a replaced
    version is PreconditionFailed (ESTALE), a missing key NoSuchKey (ENOENT), a range past
    the end InvalidRange."""
    s3.put_object(Bucket=bucket, Key="k", Body=b"0123456789")
    stale = '"0123456789abcdef0123456789abcdef"'
    for store in _stores(squall.endpoint, bucket):
        with pytest.raises(se.PreconditionFailed) as caught:
            store.get_into("k", 0, memoryview(bytearray(4)), if_match=stale)
        assert errno_for(caught.value) == errno.ESTALE
        with pytest.raises(se.PreconditionFailed):
            store.get_range("k", 0, 4, if_match=stale)
        with pytest.raises(se.NoSuchKey) as missing:
            store.get_into("absent", 0, memoryview(bytearray(4)))
        assert errno_for(missing.value) == errno.ENOENT
        with pytest.raises(se.InvalidRange):
            store.get_range("k", 20, 24)
        assert store.get_range("k", 3, 3) == b""


def _truncating_server(body_sent: bytes, declared: int) -> tuple[socket.socket, str]:
    """A loopback server answering every request with a 206 that declares ``declared``
    bytes, sends ``body_sent`` and closes the connection."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                request = b""
                while b"\r\n\r\n" not in request:
                    request += conn.recv(65536)
                conn.sendall(b"HTTP/1.1 206 Partial Content\r\n"
                             b"Content-Length: %d\r\nContent-Range: bytes 0-%d/%d\r\n\r\n%s"
                             % (declared, declared - 1, declared, body_sent))

    threading.Thread(target=serve, daemon=True).start()
    return server, f"http://127.0.0.1:{server.getsockname()[1]}"


def test_store_ranged_get_goes_through_boto3_when_the_body_breaks_off(
        squall: SquallProcess, s3, bucket: str) -> None:
    """Fault injected (the real gateway does not cut a body short on demand): the light
    path reads from a server that sends half the body and closes; the block is then
    fetched through boto3 from the gateway, whole."""
    body = os.urandom(200_000)
    etag = s3.put_object(Bucket=bucket, Key="cut", Body=body)["ETag"]
    server, url = _truncating_server(body[:100_000], len(body))
    with server:
        cut = light(url, bucket)
        into = bytearray(len(body))
        assert not cut.get_into("cut", 0, memoryview(into), if_match=etag)
        assert cut.get_range("cut", 0, len(body), if_match=etag) is None
        store, _ = _stores(squall.endpoint, bucket)
        store._light = cut  # the fault injected
        store.get_into("cut", 0, memoryview(into), if_match=etag)
        assert into == body
        assert store.get_range("cut", 0, len(body), if_match=etag) == body
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
        store._light = light(dead, bucket)  # the fault injected: a closed port
        into[:] = bytes(len(body))
        store.get_into("cut", 0, memoryview(into), if_match=etag)
        assert into == body


def _pages(store: BucketClient, prefix: str, *, delimiter: str = "/", max_keys: int = 1000
           ) -> list[tuple[list[tuple[str, int, str]], list[str], bool]]:
    return [([(o.key, o.size, o.etag) for o in page.objects], list(page.prefixes),
             page.truncated)
            for page in store.list_dir(prefix, delimiter=delimiter, max_keys=max_keys)]


def test_light_listing_pages_are_boto3_pages(squall: SquallProcess, s3, bucket: str) -> None:
    """Names that need URL-encoding, sub-directories (common prefixes), several pages and
    a page cut short by max_keys: the same pages, entries and times as through boto3."""
    keys = [f"ls/{k}" for k in KEYS] + [f"ls/sub{i}/x" for i in range(3)] + [
        f"ls/many-{i:04d}" for i in range(1200)]
    for key in keys[:len(KEYS) + 3]:
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: s3.put_object(Bucket=bucket, Key=k, Body=b""),
                      keys[len(KEYS) + 3:]))
    light_store = BucketClient(squall.endpoint, bucket, Credentials(ACCESS_KEY, SECRET_KEY))
    boto3_store = BucketClient(squall.endpoint, bucket,
                               Credentials(ACCESS_KEY, SECRET_KEY), light_requests=False)
    for prefix, delimiter, max_keys in (("ls/", "/", 1000), ("ls/", "", 1000),
                                        ("ls/", "/", 7), ("absent/", "/", 1000)):
        pages = _pages(light_store, prefix, delimiter=delimiter, max_keys=max_keys)
        assert pages == _pages(boto3_store, prefix, delimiter=delimiter, max_keys=max_keys)
    flat = _pages(light_store, "ls/", delimiter="")
    assert [len(p[0]) for p in flat] == [1000, len(keys) - 1000]
    assert {name for page in flat for name, _, _ in page[0]} == set(keys)
    assert [p[2] for p in flat] == [True, False]
    delimited = _pages(light_store, "ls/")
    assert [p for page in delimited for p in page[1]] == [
        "ls/dir/", "ls/sub0/", "ls/sub1/", "ls/sub2/", "ls/unicodé/"]
    times = {o.key: o.mtime for page in light_store.list_dir("ls/") for o in page.objects}
    assert times == {o.key: o.mtime for page in boto3_store.list_dir("ls/")
                     for o in page.objects}
    assert all(t > 1.7e9 for t in times.values())


def test_light_listing_declines_what_it_cannot_read(squall: SquallProcess, bucket: str) -> None:
    """A refused request (wrong secret, a bucket that does not exist): None, and the
    store's answer is boto3's typed error; documents that are not listings: errors the
    caller turns into a request through boto3."""
    assert light(squall.endpoint, bucket, secret="wrong").list_page("", "/", 1000, None) is None
    assert light(squall.endpoint, "no-such-bucket-here").list_page("", "/", 10, None) is None
    store = BucketClient(squall.endpoint, "no-such-bucket-here",
                         Credentials(ACCESS_KEY, SECRET_KEY))
    with pytest.raises(se.NoSuchBucket):
        list(store.list_dir(""))
    for document in (b"<Error><Code>x</Code></Error>", b"not xml",
                     b"<ListBucketResult><Contents><Key>k</Key></Contents></ListBucketResult>",
                     (b"<ListBucketResult><Contents><Key>k</Key><Size>x</Size>"
                      b"<LastModified>2026-01-01T00:00:00.000Z</LastModified></Contents>"
                      b"</ListBucketResult>")):
        with pytest.raises((ElementTree.ParseError, ValueError)):
            _list_page(document)
    assert _list_page(b"<ListBucketResult><IsTruncated>false</IsTruncated>"
                      b"</ListBucketResult>") == ([], [], False, None)


# Routed to the owners of a cluster's keys (routing.py).

def test_light_requests_go_to_each_keys_owner(tmp_path: Path) -> None:
    """Every object request of the light path is sent to, and signed for, its key's owner
    (no member forwards one); listings go to the endpoint; a member this machine cannot
    reach has its keys sent to the endpoint, which forwards them."""
    cluster = Cluster(tmp_path).start()
    try:
        cluster.clients[0].create_bucket(Bucket="routed")
        endpoint, creds = cluster.nodes[0].endpoint, Credentials(ACCESS_KEY, SECRET_KEY)
        router = OwnerRouter(endpoint, cluster.urls, lambda: tuple(cluster.urls))
        routed = LightRequests(endpoint, "routed", creds, region="us-east-1", pool_size=4,
                               connect_timeout=2, read_timeout=10, router=router)
        store = BucketClient(endpoint, "routed", creds, max_attempts=1, router=router)
        assert store.streams  # the light path stays on when routed
        keys = [cluster.key_owned_by(node, "routed", prefix="dir/k") for node in range(3)]
        bodies = {key: bytearray(os.urandom(3000 + i)) for i, key in enumerate(keys)}
        before = cluster.forwarded()
        for key, body in bodies.items():
            assert routed.put(key, body, {"mode": "33188"}, _crc32c(body)) is not None
            found = routed.head(key)
            assert isinstance(found, tuple) and found[0] == len(body)
            assert routed.get_range(key, 10, 20, if_match=found[1]) == body[10:20]
            stream = routed.open_range(key, 0, len(body), if_match=None)
            into = bytearray(len(body))
            assert stream is not None and stream.read_into(memoryview(into)) and into == body
            upload_id = store.create_upload(f"{key}.mp", {})  # boto3, routed by its hook
            part = routed.upload_part(f"{key}.mp", upload_id, 1, body, _crc32c(body))
            assert part is not None
            store.complete_upload(f"{key}.mp", upload_id,
                                  [Part(1, part, _crc32c(body))])
            assert store.head(f"{key}.mp").size == len(body)
        page = routed.list_page("dir/", "/", 1000, None)
        assert page is not None and sorted(o[0] for o in page[0]) == sorted(
            [*keys, *(f"{k}.mp" for k in keys)])
        assert cluster.forwarded() == before  # no request took the extra hop
        for key, body in bodies.items():
            got = cluster.clients[2].get_object(Bucket="routed", Key=f"{key}.mp")
            assert got["Body"].read() == body

        before = cluster.forwarded()
        away = cluster.urls[1]
        partly = LightRequests(endpoint, "routed", creds, region="us-east-1", pool_size=4,
                               connect_timeout=2, read_timeout=10, router=OwnerRouter(
                                   endpoint, cluster.urls, lambda: tuple(cluster.urls),
                                   unreachable=[away]))
        assert isinstance(partly.head(keys[2]), tuple)
        assert cluster.forwarded() == before
        assert isinstance(partly.head(keys[1]), tuple)  # through the endpoint
        assert cluster.forwarded() == before + 1
    finally:
        cluster.stop()
