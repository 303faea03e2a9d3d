"""The peer protocol's JSON: infos and typed errors survive the trip unchanged."""

from __future__ import annotations

import dataclasses
import json

import pytest

from backends.core.base import ObjectInfo, ObjectMeta, UploadInfo
from backends.core.errors import (
    InvalidRange,
    NoSuchKey,
    NoSuchUpload,
    NoSuchVersion,
    SlowDown,
    StorageError,
)
from gateway.cluster import wire
from gateway.cluster.errors import MemberUnavailable
from gateway.cluster.keyops import MAX_DELETE_ITEMS
from gateway.protocol.errors import InvalidArgument, s3_error_for
from gateway.versioning.objects import DeleteOutcome


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
                  MemberUnavailable("http://m:1", "connection refused")):
        back = wire.error_from(_trip(wire.error_to(error)))
        assert type(back) is type(error)
        assert vars(back) == vars(error)
        assert s3_error_for(back) == s3_error_for(error)


def test_unknown_error_types_become_storage_errors() -> None:
    back = wire.error_from({"type": "FromTheFuture", "message": "m", "resource": "r"})
    assert type(back) is StorageError and back.message == "m"


def test_delete_items_and_answers_round_trip() -> None:
    items = [("k\t\u65e5", None), ("a/b", "0661261f0f6b3e30c748f5ab"), ("n", "null")]
    assert wire.items_from_json(_trip(wire.items_to_json(items))) == items  # type: ignore[arg-type]
    answers = [DeleteOutcome("0661261f0f6b3e30c748f5ab", True), DeleteOutcome(None, False),
               NoSuchVersion("b", "k", "null"),
               MemberUnavailable("http://m:1", "connection refused")]
    back = [wire.answer_from_json(_trip(wire.answer_to_json(a))) for a in answers]
    assert back[:2] == answers[:2]
    assert [(type(b), vars(b)) for b in back[2:]] == [(type(a), vars(a)) for a in answers[2:]]


@pytest.mark.parametrize("data", [{"key": "k"}, [{"key": 1}], [{"key": "k", "version_id": 2}],
                                  ["k"], [{"version_id": None}],
                                  [{"key": "k"}] * (MAX_DELETE_ITEMS + 1)])
def test_malformed_delete_items_are_refused(data: object) -> None:
    with pytest.raises((ValueError, TypeError)):
        wire.items_from_json(data)


@pytest.mark.parametrize("value", [
    ObjectInfo("b", "k", 1, "e", 1.0, ObjectMeta(user={"a": "b"}, tags={"t": "1"},
                                               checksum=("CRC32", "x"),
                                               cache_control="no-cache"), "v1"),
    UploadInfo("b", "k", "u", 2.0, ObjectMeta()),
    ObjectMeta(content_type="text/plain", expires="soon"),
])
def test_to_json_is_asdict(value: ObjectInfo | UploadInfo | ObjectMeta) -> None:
    assert wire.to_json(value) == dataclasses.asdict(value)


def test_mirror_copies_travel_in_one_body() -> None:
    info = ObjectInfo("b", "k 1", 3, "e", 1.0, ObjectMeta(user={"a": "b"}))
    copies = [wire.MirrorCopy("b", "k 1", 4, 7, info, b"abc"),
              wire.MirrorCopy("b", "gone", 4, 8, None, b""),
              wire.MirrorCopy("b", "k\n2", 5, 9, info, b"\n\nxy")]
    assert wire.copies_from(wire.copies_to(copies)) == copies


@pytest.mark.parametrize("body", [
    b"not json\n", b'[{"bucket": "b"}]\n',
    b'[{"bucket": "b", "key": "k", "epoch": 1, "seq": 1, "info": null, "size": 5}]\nabc',
    b'[{"bucket": "b", "key": "k", "epoch": 1, "seq": 1, "info": null, "size": 1}]\nabc',
    b'[{"bucket": "b", "key": "k", "epoch": 1, "seq": 1, "info": null, "size": -1}]\n',
])
def test_a_malformed_mirror_batch_is_refused(body: bytes) -> None:
    with pytest.raises((ValueError, TypeError, KeyError)):
        wire.copies_from(body)
