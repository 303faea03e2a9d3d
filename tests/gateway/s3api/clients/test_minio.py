"""The MinIO Python client against a real gateway."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from minio import Minio
from minio.commonconfig import CopySource
from minio.deleteobjects import DeleteObject
from minio.error import S3Error

from tests.gateway.s3api.clients.helpers import (
    MiB,
    file_sha256,
    make_minio,
    multipart_etag,
    new_bucket_name,
    parse_error,
    payload,
    sha256,
)
from tests.support.server import ACCESS_KEY, SquallProcess


def _read(mc: Minio, bucket: str, key: str, offset: int = 0, length: int = 0) -> bytes:
    resp = mc.get_object(bucket, key, offset=offset, length=length)
    try:
        return resp.read()
    finally:
        resp.close()
        resp.release_conn()


@pytest.fixture
def mbucket(mc: Minio) -> Iterator[str]:
    """A fresh bucket made with the MinIO client itself."""
    name = new_bucket_name("minio")
    mc.make_bucket(name)
    yield name


def test_make_bucket_and_bucket_exists(mc: Minio) -> None:
    name = new_bucket_name("minio")
    assert not mc.bucket_exists(name)
    mc.make_bucket(name)
    assert mc.bucket_exists(name)
    assert name in {b.name for b in mc.list_buckets()}
    # Re-creating one's own bucket: 409 BucketAlreadyOwnedByYou, or (us-east-1 legacy) 200.
    try:
        mc.make_bucket(name)
    except S3Error as err:
        assert (err.code, err.response.status) == ("BucketAlreadyOwnedByYou", 409)
    data = payload(10, "exists")
    mc.put_object(name, "k", io.BytesIO(data), len(data))
    assert sha256(_read(mc, name, "k")) == sha256(data)


def test_put_get_stat_known_length(mc: Minio, mbucket: str) -> None:
    data = payload(300_000, "minio-put")
    res = mc.put_object(mbucket, "dir/obj.bin", io.BytesIO(data), len(data),
                        content_type="application/x-test", metadata={"origin": "minio"})
    assert res.etag == hashlib.md5(data).hexdigest()

    st = mc.stat_object(mbucket, "dir/obj.bin")
    assert st.size == len(data)
    assert st.etag == res.etag
    assert st.content_type == "application/x-test"
    assert (st.metadata or {}).get("x-amz-meta-origin") == "minio"

    assert sha256(_read(mc, mbucket, "dir/obj.bin")) == sha256(data)
    assert _read(mc, mbucket, "dir/obj.bin", offset=1000, length=500) == data[1000:1500]
    assert _read(mc, mbucket, "dir/obj.bin", offset=len(data) - 7) == data[-7:]


def test_put_unknown_length_streams_multipart(mc: Minio, mbucket: str) -> None:
    data = payload(12 * MiB + 5, "minio-stream")
    part = 5 * MiB
    res = mc.put_object(mbucket, "stream.bin", io.BytesIO(data), length=-1, part_size=part,
                        content_type="video/x-stream", metadata={"origin": "stream"})
    parts = [data[i:i + part] for i in range(0, len(data), part)]
    assert f'"{res.etag}"' == multipart_etag(parts)
    st = mc.stat_object(mbucket, "stream.bin")
    assert st.size == len(data)
    assert st.content_type == "video/x-stream"
    assert (st.metadata or {}).get("x-amz-meta-origin") == "stream"
    assert sha256(_read(mc, mbucket, "stream.bin")) == sha256(data)


def test_list_objects(mc: Minio, mbucket: str) -> None:
    files = {"a": payload(1, "a"), "d/b": payload(2, "b"), "d/e/c": payload(3, "c"),
             "z": payload(4, "z")}
    for key, data in files.items():
        mc.put_object(mbucket, key, io.BytesIO(data), len(data))

    # The client yields a page's objects first, then its common prefixes.
    flat = sorted((o.object_name, o.is_dir) for o in mc.list_objects(mbucket))
    assert flat == [("a", False), ("d/", True), ("z", False)]
    deep = {o.object_name: o.size for o in mc.list_objects(mbucket, recursive=True)}
    assert deep == {k: len(v) for k, v in files.items()}
    inner = sorted((o.object_name, o.is_dir) for o in mc.list_objects(mbucket, prefix="d/"))
    assert inner == [("d/b", False), ("d/e/", True)]
    after = [o.object_name for o in mc.list_objects(mbucket, recursive=True, start_after="d/b")]
    assert after == ["d/e/c", "z"]
    for key, data in files.items():
        assert _read(mc, mbucket, key) == data


def test_copy_and_remove_object(mc: Minio, mbucket: str) -> None:
    data = payload(40_000, "minio-copy")
    src = mc.put_object(mbucket, "src", io.BytesIO(data), len(data), metadata={"k": "v"})
    res = mc.copy_object(mbucket, "copies/dst", CopySource(mbucket, "src"))
    assert res.etag == src.etag
    assert sha256(_read(mc, mbucket, "copies/dst")) == sha256(data)
    copied = mc.stat_object(mbucket, "copies/dst")
    assert (copied.metadata or {}).get("x-amz-meta-k") == "v"

    mc.remove_object(mbucket, "src")
    with pytest.raises(S3Error) as err:
        mc.stat_object(mbucket, "src")
    assert err.value.code == "NoSuchKey"
    assert err.value.response.status == 404
    with pytest.raises(S3Error) as err:
        _read(mc, mbucket, "src")
    assert err.value.code == "NoSuchKey"
    assert err.value.response.status == 404
    # The copy is independent of its source.
    assert sha256(_read(mc, mbucket, "copies/dst")) == sha256(data)
    # Removing a missing key is not an error in S3.
    mc.remove_object(mbucket, "src")


def test_remove_objects_bulk(mc: Minio, mbucket: str) -> None:
    keep = payload(99, "keep")
    mc.put_object(mbucket, "keep", io.BytesIO(keep), len(keep))
    names = [f"bulk/{i:03d}" for i in range(25)]
    for n in names:
        mc.put_object(mbucket, n, io.BytesIO(n.encode()), len(n))

    targets = [DeleteObject(n) for n in names] + [DeleteObject("bulk/never-existed")]
    errors = list(mc.remove_objects(mbucket, targets))
    assert errors == []
    assert [o.object_name for o in mc.list_objects(mbucket, recursive=True)] == ["keep"]
    assert sha256(_read(mc, mbucket, "keep")) == sha256(keep)

    # A bulk delete against a missing bucket reports the error, it does not pass silently.
    with pytest.raises(S3Error) as err:
        list(mc.remove_objects(new_bucket_name("missing"), [DeleteObject("x")]))
    assert err.value.code == "NoSuchBucket"
    assert err.value.response.status == 404


def test_presigned_get_and_put(mc: Minio, mbucket: str) -> None:
    data = payload(123_456, "minio-presign")
    put_url = mc.presigned_put_object(mbucket, "p/obj", expires=timedelta(minutes=5))
    r = httpx.put(put_url, content=data)
    assert r.status_code == 200, r.text
    assert r.headers["etag"] == f'"{hashlib.md5(data).hexdigest()}"'

    get_url = mc.presigned_get_object(mbucket, "p/obj", expires=timedelta(minutes=5))
    r = httpx.get(get_url)
    assert r.status_code == 200, r.text
    assert sha256(r.content) == sha256(data)

    # The signature covers the key: the same query string on another key is refused.
    r = httpx.get(get_url.replace("/p/obj?", "/p/other?"))
    err = parse_error(r.status_code, r.headers, r.content)
    assert (err.status, err.code) == (403, "SignatureDoesNotMatch")


def test_expired_presigned_url_is_access_denied(mc: Minio, mbucket: str) -> None:
    data = payload(1000, "expired")
    mc.put_object(mbucket, "e", io.BytesIO(data), len(data))
    signed_at = datetime.now(UTC) - timedelta(hours=2)
    url = mc.presigned_get_object(mbucket, "e", expires=timedelta(hours=1),
                                  request_date=signed_at)
    r = httpx.get(url)
    err = parse_error(r.status_code, r.headers, r.content)
    assert (err.status, err.code) == (403, "AccessDenied")
    assert "xml" in err.content_type
    assert data not in r.content
    # Same object, fresh URL: served.
    assert sha256(httpx.get(mc.presigned_get_object(mbucket, "e")).content) == sha256(data)


def test_fput_fget(mc: Minio, mbucket: str, tmp_path: Path) -> None:
    data = payload(11 * MiB, "minio-fput")
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    res = mc.fput_object(mbucket, "files/in.bin", str(src), part_size=5 * MiB)
    part = 5 * MiB
    assert f'"{res.etag}"' == multipart_etag([data[i:i + part]
                                              for i in range(0, len(data), part)])
    dst = tmp_path / "out" / "in.bin"
    mc.fget_object(mbucket, "files/in.bin", str(dst))
    assert file_sha256(dst) == sha256(data)


def test_errors(mc: Minio, mbucket: str) -> None:
    data = payload(64, "minio-errors")
    mc.put_object(mbucket, "k", io.BytesIO(data), len(data))

    with pytest.raises(S3Error) as err:
        mc.remove_bucket(mbucket)
    assert (err.value.code, err.value.response.status) == ("BucketNotEmpty", 409)

    missing = new_bucket_name("missing")
    with pytest.raises(S3Error) as err:
        mc.put_object(missing, "k", io.BytesIO(data), len(data))
    assert (err.value.code, err.value.response.status) == ("NoSuchBucket", 404)
    with pytest.raises(S3Error) as err:
        mc.remove_bucket(missing)
    assert (err.value.code, err.value.response.status) == ("NoSuchBucket", 404)
    assert sha256(_read(mc, mbucket, "k")) == sha256(data)


def test_wrong_credentials(squall: SquallProcess, mbucket: str, mc: Minio) -> None:
    data = payload(64, "minio-creds")
    mc.put_object(mbucket, "k", io.BytesIO(data), len(data))

    bad_key = make_minio(squall.endpoint, access_key="NOSUCHKEY0000000")
    with pytest.raises(S3Error) as err:
        bad_key.list_buckets()
    assert (err.value.code, err.value.response.status) == ("InvalidAccessKeyId", 403)

    bad_secret = make_minio(squall.endpoint, access_key=ACCESS_KEY, secret_key="wrong-secret")
    with pytest.raises(S3Error) as err:
        bad_secret.list_buckets()
    assert (err.value.code, err.value.response.status) == ("SignatureDoesNotMatch", 403)
    assert sha256(_read(mc, mbucket, "k")) == sha256(data)


def test_special_key_names(mc: Minio, mbucket: str) -> None:
    keys = ["with space/a b", "ünïcødé/ß€", "plus+eq=amp&pct%25(1)", "semi;colon,comma@at$",
            "tilde~star*quote'"]
    for i, key in enumerate(keys):
        data = payload(100 + i, key)
        mc.put_object(mbucket, key, io.BytesIO(data), len(data))
        assert _read(mc, mbucket, key) == data
        r = httpx.get(mc.presigned_get_object(mbucket, key))
        assert r.status_code == 200, r.text
        assert sha256(r.content) == sha256(data)
        mc.copy_object(mbucket, f"copy/{key}", CopySource(mbucket, key))
        assert _read(mc, mbucket, f"copy/{key}") == data
    listed = {o.object_name for o in mc.list_objects(mbucket, recursive=True)}
    assert listed == set(keys) | {f"copy/{k}" for k in keys}
