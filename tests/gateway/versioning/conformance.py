"""The versioning conformance suite: S3 versioning semantics over any backend.

Subclass ``VersioningConformance`` and supply an async ``backend`` fixture (a fresh
backend, as for tests/backends/conformance.py). Everything runs through ObjectService,
which implements versioning once above the backend (and above the cache tier).
"""

from __future__ import annotations

import json
import uuid
from typing import Any, ClassVar

import pytest

from backends.core.base import CompletedPart, ObjectMeta
from backends.core.errors import (
    BackendError,
    BucketNotEmpty,
    InvalidVersionId,
    NoSuchKey,
    NoSuchVersion,
    PreconditionFailed,
)
from gateway.protocol.errors import SourceIsDeleteMarker, VersionIsDeleteMarker
from gateway.service.objects import CopySource, ObjectService
from gateway.versioning import VersioningStatus
from gateway.versioning.errors import DeleteMarkerIsLatest
from gateway.versioning.listing import VersionPage
from gateway.versioning.records import CONFIG_KEY, FORMAT
from tests.backends.conformance import blob, body_of, read_all

ENABLED = VersioningStatus.ENABLED
SUSPENDED = VersioningStatus.SUSPENDED
UNKNOWN_ID = "0" * 24


class VersioningConformance:
    """S3 versioning through ObjectService over the ``backend`` fixture of a subclass."""

    min_part_size: int = 64 * 1024
    # A key with a tab, whose records need the escaped layout; a subclass for a service
    # that cannot copy such keys may turn it off (and say why).
    tab_key: ClassVar[bool] = True

    @pytest.fixture
    async def service(self, backend: Any) -> ObjectService:
        return ObjectService(backend)

    @pytest.fixture
    async def bucket(self, service: ObjectService) -> str:
        name = f"ver-{uuid.uuid4().hex[:12]}"
        await service.create_bucket(name)
        return name

    @staticmethod
    async def put(service: ObjectService, bucket: str, key: str, data: bytes,
                  **kwargs: Any) -> Any:
        return await service.put_object(bucket, key, body_of(data),
                                        meta=kwargs.pop("meta", ObjectMeta()), **kwargs)

    @staticmethod
    async def get(service: ObjectService, bucket: str, key: str,
                  version_id: str | None = None) -> bytes:
        return await read_all(await service.get_object(bucket, key, byte_range=None,
                                                       version_id=version_id))

    @staticmethod
    async def versions(service: ObjectService, bucket: str, prefix: str = "",
                       **kwargs: Any) -> VersionPage:
        defaults: dict[str, Any] = {"delimiter": "", "max_keys": 1000, "key_marker": "",
                                    "version_id_marker": ""}
        defaults.update(kwargs)
        return await service.list_object_versions(bucket, prefix=prefix, **defaults)

    @staticmethod
    def summary(page: VersionPage) -> list[tuple[str, str | None, bool, bool]]:
        return [(e.info.key, e.info.version_id, e.delete_marker, e.is_latest)
                for e in page.entries]

    async def keys(self, service: ObjectService, bucket: str) -> list[str]:
        page = await service.list_objects(bucket, prefix="", delimiter="", max_keys=1000,
                                          after="")
        return [o.key for o in page.objects]

    # -- states ------------------------------------------------------------------------

    async def test_new_bucket_is_unversioned(self, service: ObjectService,
                                             bucket: str) -> None:
        assert await service.get_bucket_versioning(bucket) is VersioningStatus.UNVERSIONED
        info = await self.put(service, bucket, "k", b"one")
        assert info.version_id is None
        assert (await service.head_object(bucket, "k")).version_id is None
        assert await self.get(service, bucket, "k", "null") == b"one"
        with pytest.raises(NoSuchVersion):
            await service.head_object(bucket, "k", version_id=UNKNOWN_ID)
        page = await self.versions(service, bucket)
        assert self.summary(page) == [("k", "null", False, True)]

    async def test_status_transitions(self, service: ObjectService, bucket: str) -> None:
        await service.put_bucket_versioning(bucket, ENABLED)
        assert await service.get_bucket_versioning(bucket) is ENABLED
        await service.put_bucket_versioning(bucket, SUSPENDED)
        assert await service.get_bucket_versioning(bucket) is SUSPENDED
        with pytest.raises(ValueError):
            await service.put_bucket_versioning(bucket, VersioningStatus.UNVERSIONED)
        await service.put_bucket_versioning(bucket, ENABLED)
        assert await service.get_bucket_versioning(bucket) is ENABLED
        assert await self.keys(service, bucket) == []  # the status is not an object

    async def test_status_is_stored_with_magic_and_format(self, backend: Any,
                                                          service: ObjectService,
                                                          bucket: str) -> None:
        await service.put_bucket_versioning(bucket, SUSPENDED)
        stored = json.loads(await read_all(await backend.get_object(bucket, CONFIG_KEY)))
        assert stored == {"magic": "squall.versioning", "v": FORMAT, "status": "Suspended"}

    async def test_unknown_format_is_refused_and_damage_keeps_versions(
            self, backend: Any, service: ObjectService, bucket: str) -> None:
        await service.put_bucket_versioning(bucket, ENABLED)
        await self.put(service, bucket, "k", b"kept")
        newer = {"magic": "squall.versioning", "v": FORMAT + 1, "status": "Suspended"}
        await backend.put_object(bucket, CONFIG_KEY, body_of(json.dumps(newer).encode()),
                                 meta=ObjectMeta())
        fresh = ObjectService(backend)  # no cached status
        with pytest.raises(BackendError, match=f"versioning format {FORMAT + 1}"):
            await fresh.get_bucket_versioning(bucket)
        with pytest.raises(BackendError):
            await self.put(fresh, bucket, "k", b"misread")
        await backend.put_object(bucket, CONFIG_KEY, body_of(b"\x00damaged"), meta=ObjectMeta())
        fresh = ObjectService(backend)
        assert await fresh.get_bucket_versioning(bucket) is ENABLED
        assert await self.get(fresh, bucket, "k") == b"kept"

    # -- enabled -----------------------------------------------------------------------

    async def test_every_put_makes_a_version(self, service: ObjectService,
                                             bucket: str) -> None:
        await service.put_bucket_versioning(bucket, ENABLED)
        datas = [blob(1000 + i, seed=i) for i in range(3)]
        infos = [await self.put(service, bucket, "k", d) for d in datas]
        ids = [i.version_id for i in infos]
        assert len(set(ids)) == 3 and ids == sorted(ids)  # ids sort by time
        assert await self.get(service, bucket, "k") == datas[2]
        for info, data in zip(infos, datas, strict=True):
            assert await self.get(service, bucket, "k", info.version_id) == data
            head = await service.head_object(bucket, "k", version_id=info.version_id)
            assert head.etag == info.etag and head.size == len(data)
            assert head.version_id == info.version_id
        page = await self.versions(service, bucket)
        assert self.summary(page) == [("k", ids[2], False, True), ("k", ids[1], False, False),
                                      ("k", ids[0], False, False)]
        assert [e.info.etag for e in page.entries] == [i.etag for i in reversed(infos)]
        assert await self.keys(service, bucket) == ["k"]

    async def test_object_before_enabling_is_the_null_version(
            self, service: ObjectService, bucket: str) -> None:
        await self.put(service, bucket, "k", b"old", meta=ObjectMeta(user={"a": "1"}))
        await service.put_bucket_versioning(bucket, ENABLED)
        head = await service.head_object(bucket, "k")
        assert head.version_id == "null" and head.meta.user == {"a": "1"}
        new = await self.put(service, bucket, "k", b"new")
        assert self.summary(await self.versions(service, bucket)) == [
            ("k", new.version_id, False, True), ("k", "null", False, False)]
        old = await service.head_object(bucket, "k", version_id="null")
        assert old.meta.user == {"a": "1"} and old.size == 3
        assert await self.get(service, bucket, "k", "null") == b"old"
        outcome = await service.delete_object(bucket, "k", version_id="null")
        assert outcome.version_id == "null" and not outcome.delete_marker
        assert self.summary(await self.versions(service, bucket)) == [
            ("k", new.version_id, False, True)]

    async def test_delete_makes_a_marker_and_deleting_it_restores(
            self, service: ObjectService, bucket: str) -> None:
        await service.put_bucket_versioning(bucket, ENABLED)
        v1 = await self.put(service, bucket, "k", b"data")
        outcome = await service.delete_object(bucket, "k")
        assert outcome.delete_marker and outcome.version_id not in (None, v1.version_id)
        marker = outcome.version_id
        assert marker is not None
        with pytest.raises(DeleteMarkerIsLatest) as latest:
            await self.get(service, bucket, "k")
        assert latest.value.response_headers["x-amz-version-id"] == marker
        with pytest.raises(NoSuchKey):
            await service.head_object(bucket, "k")
        with pytest.raises(VersionIsDeleteMarker):
            await self.get(service, bucket, "k", marker)
        with pytest.raises(VersionIsDeleteMarker):
            await service.head_object(bucket, "k", version_id=marker)
        assert await self.get(service, bucket, "k", v1.version_id) == b"data"
        assert await self.keys(service, bucket) == []
        assert self.summary(await self.versions(service, bucket)) == [
            ("k", marker, True, True), ("k", v1.version_id, False, False)]
        second = await service.delete_object(bucket, "k")  # a marker on a marker
        assert second.delete_marker and second.version_id != marker
        await service.delete_object(bucket, "k", version_id=second.version_id)
        removed = await service.delete_object(bucket, "k", version_id=marker)
        assert removed.delete_marker and removed.version_id == marker
        assert await self.get(service, bucket, "k") == b"data"
        assert (await service.head_object(bucket, "k")).version_id == v1.version_id
        assert await self.keys(service, bucket) == ["k"]

    async def test_delete_of_a_missing_key_still_makes_a_marker(
            self, service: ObjectService, bucket: str) -> None:
        await service.put_bucket_versioning(bucket, ENABLED)
        outcome = await service.delete_object(bucket, "never")
        assert outcome.delete_marker
        assert self.summary(await self.versions(service, bucket)) == [
            ("never", outcome.version_id, True, True)]

    async def test_deleting_the_current_version_promotes_the_previous(
            self, service: ObjectService, bucket: str) -> None:
        await service.put_bucket_versioning(bucket, ENABLED)
        v1 = await self.put(service, bucket, "k", b"one", meta=ObjectMeta(tags={"t": "1"}))
        v2 = await self.put(service, bucket, "k", b"two")
        await service.delete_object(bucket, "k", version_id=v2.version_id)
        assert await self.get(service, bucket, "k") == b"one"
        head = await service.head_object(bucket, "k")
        assert head.version_id == v1.version_id and head.etag == v1.etag
        assert head.meta.tags == {"t": "1"}
        assert abs(head.last_modified - v1.last_modified) < 1
        assert self.summary(await self.versions(service, bucket)) == [
            ("k", v1.version_id, False, True)]
        await service.delete_object(bucket, "k", version_id=v1.version_id)
        with pytest.raises(NoSuchKey):
            await service.head_object(bucket, "k")
        assert (await self.versions(service, bucket)).entries == []

    async def test_deleting_a_noncurrent_version(self, service: ObjectService,
                                                 bucket: str) -> None:
        await service.put_bucket_versioning(bucket, ENABLED)
        v1 = await self.put(service, bucket, "k", b"one")
        v2 = await self.put(service, bucket, "k", b"two")
        await service.delete_object(bucket, "k", version_id=v1.version_id)
        assert self.summary(await self.versions(service, bucket)) == [
            ("k", v2.version_id, False, True)]
        with pytest.raises(NoSuchVersion):
            await self.get(service, bucket, "k", v1.version_id)

    async def test_unknown_and_malformed_version_ids(self, service: ObjectService,
                                                     bucket: str) -> None:
        await service.put_bucket_versioning(bucket, ENABLED)
        await self.put(service, bucket, "k", b"x")
        outcome = await service.delete_object(bucket, "k", version_id=UNKNOWN_ID)
        assert outcome.version_id == UNKNOWN_ID and not outcome.delete_marker
        assert await self.get(service, bucket, "k") == b"x"  # nothing was deleted
        with pytest.raises(NoSuchVersion):
            await self.get(service, bucket, "k", UNKNOWN_ID)
        with pytest.raises(NoSuchVersion):
            await self.get(service, bucket, "k", "null")
        for bad in ("bogus", "0" * 23, "Z" * 24):
            with pytest.raises(InvalidVersionId):
                await service.head_object(bucket, "k", version_id=bad)
            with pytest.raises(InvalidVersionId):
                await service.delete_object(bucket, "k", version_id=bad)

    async def test_conditional_writes_see_the_current_version(
            self, service: ObjectService, bucket: str) -> None:
        await service.put_bucket_versioning(bucket, ENABLED)
        v1 = await self.put(service, bucket, "k", b"one")
        with pytest.raises(PreconditionFailed):
            await self.put(service, bucket, "k", b"two", if_none_match="*")
        v2 = await self.put(service, bucket, "k", b"two", if_match=v1.etag)
        await service.delete_object(bucket, "k")
        v3 = await self.put(service, bucket, "k", b"three", if_none_match="*")
        page = await self.versions(service, bucket)
        assert [e.info.version_id for e in page.entries if not e.delete_marker] == [
            v3.version_id, v2.version_id, v1.version_id]

    # -- suspended ---------------------------------------------------------------------

    async def test_suspended_put_replaces_only_the_null_version(
            self, service: ObjectService, bucket: str) -> None:
        await service.put_bucket_versioning(bucket, ENABLED)
        v1 = await self.put(service, bucket, "k", b"v1")
        await service.put_bucket_versioning(bucket, SUSPENDED)
        s1 = await self.put(service, bucket, "k", b"s1")
        assert s1.version_id == "null"
        assert self.summary(await self.versions(service, bucket)) == [
            ("k", "null", False, True), ("k", v1.version_id, False, False)]
        await self.put(service, bucket, "k", b"s2")
        assert self.summary(await self.versions(service, bucket)) == [
            ("k", "null", False, True), ("k", v1.version_id, False, False)]
        assert await self.get(service, bucket, "k", "null") == b"s2"
        assert await self.get(service, bucket, "k", v1.version_id) == b"v1"
        await service.put_bucket_versioning(bucket, ENABLED)  # null stays, noncurrent
        v2 = await self.put(service, bucket, "k", b"v2")
        assert self.summary(await self.versions(service, bucket)) == [
            ("k", v2.version_id, False, True), ("k", "null", False, False),
            ("k", v1.version_id, False, False)]
        await service.put_bucket_versioning(bucket, SUSPENDED)
        await self.put(service, bucket, "k", b"s3")  # replaces the noncurrent null
        assert self.summary(await self.versions(service, bucket)) == [
            ("k", "null", False, True), ("k", v2.version_id, False, False),
            ("k", v1.version_id, False, False)]
        assert await self.get(service, bucket, "k") == b"s3"

    async def test_suspended_delete_makes_a_null_marker(self, service: ObjectService,
                                                        bucket: str) -> None:
        await service.put_bucket_versioning(bucket, ENABLED)
        v1 = await self.put(service, bucket, "k", b"v1")
        await service.put_bucket_versioning(bucket, SUSPENDED)
        await self.put(service, bucket, "k", b"null data")
        outcome = await service.delete_object(bucket, "k")
        assert outcome.delete_marker and outcome.version_id == "null"
        assert self.summary(await self.versions(service, bucket)) == [
            ("k", "null", True, True), ("k", v1.version_id, False, False)]
        await self.put(service, bucket, "k", b"again")  # replaces the null marker
        assert self.summary(await self.versions(service, bucket)) == [
            ("k", "null", False, True), ("k", v1.version_id, False, False)]
        await service.delete_object(bucket, "k", version_id="null")
        assert await self.get(service, bucket, "k") == b"v1"

    # -- copies, multipart, tags -------------------------------------------------------

    async def test_copy_from_a_version(self, service: ObjectService, bucket: str) -> None:
        await service.put_bucket_versioning(bucket, ENABLED)
        v1 = await self.put(service, bucket, "src", b"first",
                            meta=ObjectMeta(user={"m": "1"}))
        await self.put(service, bucket, "src", b"second")
        result = await service.copy_object(
            CopySource(bucket, "src", version_id=v1.version_id), bucket, "dst", meta=None)
        assert result.source_version_id == v1.version_id
        assert result.info.version_id not in (None, v1.version_id)
        assert await self.get(service, bucket, "dst") == b"first"
        assert (await service.head_object(bucket, "dst")).meta.user == {"m": "1"}
        latest = await service.copy_object(CopySource(bucket, "src"), bucket, "dst2",
                                           meta=None)
        assert await self.get(service, bucket, "dst2") == b"second"
        assert latest.source_version_id is not None
        # Copying a version onto its own key restores it as a new version.
        await service.copy_object(CopySource(bucket, "src", version_id=v1.version_id),
                                  bucket, "src", meta=None)
        assert await self.get(service, bucket, "src") == b"first"
        assert len((await self.versions(service, bucket, "src")).entries) == 3
        marker = (await service.delete_object(bucket, "src")).version_id
        with pytest.raises(NoSuchKey):
            await service.copy_object(CopySource(bucket, "src"), bucket, "x", meta=None)
        with pytest.raises(SourceIsDeleteMarker):
            await service.copy_object(CopySource(bucket, "src", version_id=marker),
                                      bucket, "x", meta=None)
        with pytest.raises(NoSuchVersion):
            await service.copy_object(CopySource(bucket, "src", version_id=UNKNOWN_ID),
                                      bucket, "x", meta=None)

    async def test_multipart_completion_makes_a_version(self, service: ObjectService,
                                                        bucket: str) -> None:
        await service.put_bucket_versioning(bucket, ENABLED)
        v1 = await self.put(service, bucket, "mp", b"small")
        await self.put(service, bucket, "part-src", blob(self.min_part_size, seed=9))
        upload = await service.create_multipart_upload(bucket, "mp", meta=ObjectMeta())
        first = blob(self.min_part_size, seed=1)
        p1 = await service.upload_part(bucket, "mp", upload.upload_id, 1, body_of(first))
        p2, source_version = await service.upload_part_copy(
            CopySource(bucket, "part-src"), bucket, "mp", upload.upload_id, 2)
        assert source_version is not None
        info = await service.complete_multipart_upload(
            bucket, "mp", upload.upload_id,
            [CompletedPart(1, p1.etag), CompletedPart(2, p2.etag)])
        assert info.version_id not in (None, v1.version_id) and info.etag.endswith("-2")
        head = await service.head_object(bucket, "mp")
        assert head.version_id == info.version_id and head.etag == info.etag
        assert await self.get(service, bucket, "mp", v1.version_id) == b"small"
        assert self.summary(await self.versions(service, bucket, "mp")) == [
            ("mp", info.version_id, False, True), ("mp", v1.version_id, False, False)]
        # The multipart version keeps its ETag once noncurrent.
        await self.put(service, bucket, "mp", b"newer")
        old = await service.head_object(bucket, "mp", version_id=info.version_id)
        assert old.etag == info.etag

    async def test_tags_belong_to_one_version(self, service: ObjectService,
                                              bucket: str) -> None:
        await service.put_bucket_versioning(bucket, ENABLED)
        v1 = await self.put(service, bucket, "k", b"one")
        v2 = await self.put(service, bucket, "k", b"two")
        await service.replace_tags(bucket, "k", {"old": "yes"}, version_id=v1.version_id)
        await service.replace_tags(bucket, "k", {"new": "yes"})
        assert (await service.head_object(bucket, "k", version_id=v1.version_id)
                ).meta.tags == {"old": "yes"}
        current = await service.head_object(bucket, "k")
        assert current.meta.tags == {"new": "yes"} and current.version_id == v2.version_id
        assert await self.get(service, bucket, "k", v1.version_id) == b"one"

    async def test_delete_objects_with_versions(self, service: ObjectService,
                                                bucket: str) -> None:
        await service.put_bucket_versioning(bucket, ENABLED)
        v1 = await self.put(service, bucket, "a", b"1")
        await self.put(service, bucket, "a", b"2")
        results = await service.delete_objects(bucket, [("a", v1.version_id), ("b", None),
                                                        ("c", "bogus")])
        assert results[0].outcome is not None and not results[0].outcome.delete_marker
        assert results[1].outcome is not None and results[1].outcome.delete_marker
        assert isinstance(results[2].error, InvalidVersionId)
        assert [(k, m) for k, _, m, _ in self.summary(await self.versions(service, bucket))
                ] == [("a", False), ("b", True)]

    # -- listing -----------------------------------------------------------------------

    async def test_version_listing_pages_and_prefixes(self, service: ObjectService,
                                                      bucket: str) -> None:
        await self.put(service, bucket, "d/x", b"pre-versioning")
        await service.put_bucket_versioning(bucket, ENABLED)
        tab = ["a\tb"] if self.tab_key else []
        for key in ("a", "a/b", *tab, "b", "d/x", "d/y", "e"):
            for i in range(2):
                await self.put(service, bucket, key, f"{key}{i}".encode())
        await service.delete_object(bucket, "b")
        everything = await self.versions(service, bucket)
        keys = [e.info.key for e in everything.entries]
        assert keys == sorted(keys, key=lambda k: k.encode())
        assert len(everything.entries) == (6 + len(tab)) * 2 + 1 + 1
        assert not everything.is_truncated
        for key in ("a", "b", "d/x"):
            group = [e for e in everything.entries if e.info.key == key]
            assert [e.is_latest for e in group] == [True] + [False] * (len(group) - 1)
            stamps = [e.info.last_modified for e in group]
            assert stamps == sorted(stamps, reverse=True)
        for size in (1, 2, 3, 5):
            seen: list[tuple[str, str | None]] = []
            markers = ("", "")
            while True:
                page = await self.versions(service, bucket, max_keys=size,
                                           key_marker=markers[0],
                                           version_id_marker=markers[1])
                assert len(page.entries) <= size
                seen += [(e.info.key, e.info.version_id) for e in page.entries]
                if not page.is_truncated:
                    break
                assert page.next_key_marker is not None
                markers = (page.next_key_marker, page.next_version_id_marker or "")
            assert seen == [(e.info.key, e.info.version_id) for e in everything.entries]
        grouped = await self.versions(service, bucket, delimiter="/")
        assert grouped.common_prefixes == ["a/", "d/"]  # "a\tb" sorts before "a/"
        assert {e.info.key for e in grouped.entries} == {"a", *tab, "b", "e"}
        paged: list[str] = []
        markers = ("", "")
        while True:
            page = await self.versions(service, bucket, delimiter="/", max_keys=1,
                                       key_marker=markers[0], version_id_marker=markers[1])
            paged += page.common_prefixes + [e.info.key for e in page.entries]
            if not page.is_truncated:
                break
            markers = (page.next_key_marker or "", page.next_version_id_marker or "")
        assert paged == ["a", "a", *(tab * 2), "a/", "b", "b", "b", "d/", "e", "e"]
        only_d = await self.versions(service, bucket, "d/")
        assert [(e.info.key, e.info.version_id == "null") for e in only_d.entries] == [
            ("d/x", False), ("d/x", False), ("d/x", True), ("d/y", False), ("d/y", False)]
        after_null = await self.versions(service, bucket, "d/", key_marker="d/x",
                                         version_id_marker="null")
        assert [e.info.key for e in after_null.entries] == ["d/y", "d/y"]

    async def test_prefix_of_keys_past_its_restart_point_is_listed_once(
            self, service: ObjectService, bucket: str) -> None:
        """A common prefix is skipped by restarting after ``prefix + U+10FFFF``; keys
        that continue with U+10FFFF still belong to it (no repeat, no endless restart)."""
        await service.put_bucket_versioning(bucket, ENABLED)
        for key in ("a/1", "a/\U0010ffff", "a/\U0010ffffx", "b"):
            await self.put(service, bucket, key, b"x")
            await self.put(service, bucket, key, b"y")
        page = await self.versions(service, bucket, delimiter="/")
        assert page.common_prefixes == ["a/"]
        assert [e.info.key for e in page.entries] == ["b", "b"]
        page = await self.versions(service, bucket, delimiter="/", key_marker="a/")
        assert page.common_prefixes == [] and [e.info.key for e in page.entries] == ["b", "b"]
        listed = await service.list_objects(bucket, prefix="", delimiter="/", max_keys=1000,
                                            after="")
        assert listed.common_prefixes == ["a/"] and [o.key for o in listed.objects] == ["b"]

    # -- buckets -----------------------------------------------------------------------

    async def test_bucket_with_versions_is_not_empty(self, service: ObjectService,
                                                     bucket: str) -> None:
        await service.put_bucket_versioning(bucket, ENABLED)
        v1 = await self.put(service, bucket, "k", b"x")
        marker = (await service.delete_object(bucket, "k")).version_id
        assert await self.keys(service, bucket) == []
        with pytest.raises(BucketNotEmpty):
            await service.delete_bucket(bucket)
        assert await service.get_bucket_versioning(bucket) is ENABLED
        await service.delete_object(bucket, "k", version_id=v1.version_id)
        with pytest.raises(BucketNotEmpty):
            await service.delete_bucket(bucket)
        await service.delete_object(bucket, "k", version_id=marker)
        await service.delete_bucket(bucket)
        await service.create_bucket(bucket)
        assert await service.get_bucket_versioning(bucket) is VersioningStatus.UNVERSIONED
        await service.delete_bucket(bucket)
