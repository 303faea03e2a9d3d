"""The peer protocol's JSON: infos and typed errors survive the trip unchanged."""

from __future__ import annotations

import json

from backends.base import ObjectInfo, ObjectMeta, UploadInfo
from backends.errors import InvalidRange, NoSuchKey, NoSuchUpload, SlowDown, StorageError
from gateway.cluster import wire
from gateway.cluster.errors import MemberUnavailable
from gateway.s3api.errors import InvalidArgument, s3_error_for


def _trip(value: dict[str, object]) -> dict[str, object]:
    encoded = wire.dumps(value)
    assert encoded.isascii()  # it travels in headers too
    return json.loads(encoded)  # type: ignore[no-any-return]


def test_infos_round_trip() -> None:
    meta = ObjectMeta(content_type="text/plain", cache_control="no-cache",
                      user={"\u00e9": "v\u00e9"}, tags={"t": "1"}, checksum=("CRC32", "AAAAAA=="))
    info = ObjectInfo(bucket="b", key="k\t\u65e5", size=3, etag="abc", last_modified=1.5,
                      meta=meta, version_id=None)
    assert wire.info_from(_trip(wire.to_json(info))) == info
    assert wire.meta_from(_trip(wire.to_json(ObjectMeta()))) == ObjectMeta()
    upload = UploadInfo(bucket="b", key="k", upload_id="u", initiated=2.0, meta=meta)
    assert wire.upload_from(_trip(wire.to_json(upload))) == upload


def test_typed_errors_round_trip() -> None:
    for error in (NoSuchKey("b", "k"), NoSuchUpload("u1"), InvalidRange(10),
                  SlowDown("full", retry_after=7), InvalidArgument("bad"),
                  MemberUnavailable(2, "http://m:1", "connection refused")):
        back = wire.error_from(_trip(wire.error_to(error)))
        assert type(back) is type(error)
        assert vars(back) == vars(error)
        assert s3_error_for(back) == s3_error_for(error)


def test_unknown_error_types_become_storage_errors() -> None:
    back = wire.error_from({"type": "FromTheFuture", "message": "m", "resource": "r"})
    assert type(back) is StorageError and back.message == "m"
