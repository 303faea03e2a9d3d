"""S3Backend behaviour beyond the conformance suite, against a real upstream Squall.

What arrived upstream is checked with a plain boto3 client; what Squall sent is checked
with the upstream's own request counters (``/_squall/metrics``).
"""

from __future__ import annotations

import hashlib
import http.server
import re
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from backends.core.base import CompletedPart, ObjectMeta
from backends.core.errors import BadDigest, ServiceUnavailable, SlowDown
from backends.s3 import S3Backend, S3Config
from tests.backends.conformance import BodyFailure, blob, body_of, failing_body, read_all
from tests.backends.s3.conftest import MIN_PART
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess, free_port

PART = 256 * 1024


def requests_of(upstream: SquallProcess, operation: str) -> int:
    """How many ``operation`` requests the upstream Squall has handled so far."""
    text = httpx.get(f"{upstream.endpoint}/_squall/metrics").text
    pattern = rf'^squall_requests_total\{{[^}}]*operation="{operation}"[^}}]*\}} (\S+)$'
    return sum(int(float(m)) for m in re.findall(pattern, text, re.MULTILINE))


@pytest.fixture
async def backend(upstream_squall: SquallProcess, tmp_path: Path) -> AsyncIterator[S3Backend]:
    store = S3Backend(S3Config(endpoint=upstream_squall.endpoint, access_key=ACCESS_KEY,
                               secret_key=SECRET_KEY, part_size=PART, concurrency=3,
                               min_part_size=MIN_PART, copy_threshold=PART,
                               copy_part_size=PART), spool_dir=tmp_path / "spool")
    yield store
    await store.aclose()


@pytest.fixture
async def bucket(backend: S3Backend) -> str:
    name = f"s3b-{uuid.uuid4().hex[:12]}"
    await backend.create_bucket(name)
    return name


async def test_small_put_is_one_put_object(backend: S3Backend, bucket: str,
                                           upstream_squall: SquallProcess,
                                           squall_s3: Any) -> None:
    before = (requests_of(upstream_squall, "PutObject"),
              requests_of(upstream_squall, "CreateMultipartUpload"))
    data = blob(PART, seed=1)  # exactly the threshold: still one request
    info = await backend.put_object(bucket, "small", body_of(data, 10_000), meta=ObjectMeta())
    assert info.etag == hashlib.md5(data).hexdigest()
    assert (requests_of(upstream_squall, "PutObject"),
            requests_of(upstream_squall, "CreateMultipartUpload")) == (before[0] + 1, before[1])
    direct = squall_s3.get_object(Bucket=bucket, Key="small")
    assert direct["ETag"].strip('"') == info.etag and direct["Body"].read() == data


async def test_large_put_switches_to_parallel_multipart(backend: S3Backend, bucket: str,
                                                        upstream_squall: SquallProcess,
                                                        squall_s3: Any, tmp_path: Path) -> None:
    data = blob(5 * PART + 12_345, seed=2)
    parts_before = requests_of(upstream_squall, "UploadPart")
    meta = ObjectMeta(content_type="text/csv", user={"run": "42"}, tags={"t": "1"})
    info = await backend.put_object(bucket, "big", body_of(data, 50_000), meta=meta)
    md5 = hashlib.md5(data).hexdigest()
    assert (info.etag, info.size, info.meta) == (md5, len(data), meta)
    assert requests_of(upstream_squall, "UploadPart") - parts_before == 6
    assert not list((tmp_path / "spool").iterdir())  # the spooled body is gone
    # Upstream holds a 6-part object; Squall's ETag (the MD5) is recorded with it.
    direct = squall_s3.get_object(Bucket=bucket, Key="big")
    assert direct["ETag"].strip('"').endswith("-6")
    assert direct["Body"].read() == data
    assert direct["Metadata"]["squall-etag"] == md5
    head = await backend.head_object(bucket, "big")
    assert (head.etag, head.size, head.meta) == (md5, len(data), meta)
    assert await read_all(await backend.get_object(bucket, "big")) == data
    # If-Match takes Squall's ETag and is enforced upstream with the upstream one.
    again = await backend.put_object(bucket, "big", body_of(b"new"), meta=ObjectMeta(),
                                     if_match=md5)
    assert again.etag == hashlib.md5(b"new").hexdigest()


async def test_large_put_failures_leave_no_upload(backend: S3Backend, bucket: str,
                                                  squall_s3: Any) -> None:
    data = blob(3 * PART, seed=3)
    with pytest.raises(BadDigest):
        await backend.put_object(bucket, "k", body_of(data), meta=ObjectMeta(),
                                 content_md5=hashlib.md5(b"other").digest())
    with pytest.raises(BodyFailure):
        await backend.put_object(bucket, "k", failing_body(data, 2 * PART + 5),
                                 meta=ObjectMeta())
    assert squall_s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    assert squall_s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


async def test_copy_is_server_side(backend: S3Backend, bucket: str,
                                   upstream_squall: SquallProcess) -> None:
    data = blob(PART // 2, seed=4)
    src = await backend.put_object(bucket, "src", body_of(data), meta=ObjectMeta())
    counts = {op: requests_of(upstream_squall, op)
              for op in ("CopyObject", "GetObject", "PutObject", "UploadPart")}
    info = await backend.copy_object(bucket, "src", bucket, "dst",
                                     meta=ObjectMeta(user={"copy": "yes"}), src_etag=src.etag)
    await backend.replace_metadata(bucket, "dst", ObjectMeta(tags={"only": "tags"}))
    assert info.etag == src.etag
    after = {op: requests_of(upstream_squall, op) for op in counts}
    assert after == {**counts, "CopyObject": counts["CopyObject"] + 2}  # no bytes via Squall
    head = await backend.head_object(bucket, "dst")
    assert (head.etag, head.meta) == (src.etag, ObjectMeta(tags={"only": "tags"}))


async def test_large_copy_uses_upload_part_copy(backend: S3Backend, bucket: str,
                                                upstream_squall: SquallProcess) -> None:
    data = blob(3 * PART + 7, seed=5)  # above copy_threshold (PART): copied in 4 parts
    src = await backend.put_object(bucket, "src", body_of(data), meta=ObjectMeta())
    counts = {op: requests_of(upstream_squall, op)
              for op in ("UploadPartCopy", "CopyObject", "GetObject", "UploadPart")}
    info = await backend.copy_object(bucket, "src", bucket, "dst", meta=ObjectMeta())
    after = {op: requests_of(upstream_squall, op) for op in counts}
    assert after == {**counts, "UploadPartCopy": counts["UploadPartCopy"] + 4}
    assert info.etag == src.etag == (await backend.head_object(bucket, "dst")).etag
    assert await read_all(await backend.get_object(bucket, "dst")) == data


async def test_part_spools_to_disk_above_part_size(backend: S3Backend, bucket: str,
                                                   tmp_path: Path) -> None:
    upload = await backend.create_multipart_upload(bucket, "k", meta=ObjectMeta())
    data = blob(2 * PART + 1, seed=6)
    part = await backend.upload_part(bucket, "k", upload.upload_id, 1, body_of(data))
    assert (part.etag, part.size) == (hashlib.md5(data).hexdigest(), len(data))
    assert not list((tmp_path / "spool").iterdir())
    done = await backend.complete_multipart_upload(bucket, "k", upload.upload_id,
                                                   [CompletedPart(1, part.etag)])
    assert done.etag.endswith("-1")
    assert await read_all(await backend.get_object(bucket, "k")) == data


async def test_metadata_encoding_round_trip(backend: S3Backend, bucket: str,
                                            squall_s3: Any) -> None:
    meta = ObjectMeta(expires="not a date", user={
        "plain": "ascii value", "unicode": "日本語 ü", "looks-encoded": "=?UTF-8?B?eA==?=",
        "squall-etag": "a client's own key", "spaces": "  padded  ", "empty": ""})
    await backend.put_object(bucket, "k", body_of(b"x"), meta=meta)
    assert (await backend.head_object(bucket, "k")).meta == meta
    stored = squall_s3.head_object(Bucket=bucket, Key="k")["Metadata"]
    assert stored["plain"] == "ascii value" and stored["squall-expires"]
    assert stored["squall-u-squall-etag"] == "a client's own key"
    assert all(value.isascii() for value in stored.values())


# -- failures ----------------------------------------------------------------------------

@pytest.mark.timeout(60)
async def test_upstream_down_is_service_unavailable(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    store = S3Backend(S3Config(endpoint=f"http://127.0.0.1:{port}", access_key="a",
                               secret_key="b", retries=1, connect_timeout=2))
    try:
        with pytest.raises(ServiceUnavailable):
            await store.head_bucket("any")
        with pytest.raises(ServiceUnavailable):
            await store.put_object("any", "k", body_of(b"x"), meta=ObjectMeta())
    finally:
        await store.aclose()


class _SlowDownHandler(http.server.BaseHTTPRequestHandler):
    """Answers every request as an overloaded S3 does: 503 SlowDown."""

    body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
            b"<Message>Please reduce your request rate.</Message></Error>")

    def _answer(self) -> None:  # at once, body unread (the client waits for 100-continue)
        self.send_response(503)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(self.body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(self.body)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def overloaded() -> Iterator[str]:
    """A real HTTP server on loopback that refuses everything with 503 SlowDown."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SlowDownHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.mark.timeout(60)
async def test_upstream_slow_down(overloaded: str) -> None:
    store = S3Backend(S3Config(endpoint=overloaded, access_key="a", secret_key="b",
                               retries=1))
    try:
        with pytest.raises(SlowDown):
            await store.put_object("bkt", "k", body_of(b"x"), meta=ObjectMeta())
        with pytest.raises(SlowDown):  # HEAD: a bare 503 without an error body
            await store.head_object("bkt", "k")
    finally:
        await store.aclose()
