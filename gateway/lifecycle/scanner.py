"""The lifecycle scanner: every interval, walk the buckets that have enabled lifecycle
rules and carry them out through the ObjectService, as a client's requests would.

* current objects past Days/Date are deleted (a delete marker in a versioned bucket),
  only if still the version decided on and not being written (``expire_object``);
* noncurrent versions (and noncurrent delete markers) are deleted by version id once
  NoncurrentDays have passed since they became noncurrent (the creation time of the
  next newer version), keeping the NewerNoncurrentVersions newest of them;
* a delete marker that is its key's only version is removed with
  ExpiredObjectDeleteMarker, or once old enough for the rule's Days;
* multipart uploads initiated more than DaysAfterInitiation days ago are aborted.

With several gateway processes (cluster members, ``--workers``) each scanner lists the
whole bucket through its own service (which merges every member's unflushed records
with the backend) and acts only on the keys it owns, so each key and each upload is
handled by exactly one process.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter

from backends.core.base import BucketInfo, ObjectInfo
from backends.core.errors import NoSuchKey, NoSuchUpload, NoSuchVersion, StorageError
from gateway.background import PeriodicTask
from gateway.lifecycle.rules import DAY, Rule
from gateway.protocol.listing import ListPage, UploadPage
from gateway.versioning import VersioningStatus
from gateway.versioning.listing import VersionEntry, VersionPage
from gateway.versioning.objects import DeleteOutcome

log = logging.getLogger("squall.lifecycle")
PAGE = 1000


class LifecycleTarget(Protocol):
    """What the scanner asks of the gateway's object service (``ObjectService``)."""

    async def list_buckets(self) -> list[BucketInfo]: ...

    async def lifecycle_rules(self, bucket: str) -> list[Rule] | None: ...

    async def get_bucket_versioning(self, bucket: str) -> VersioningStatus: ...

    async def head_object(self, bucket: str, key: str, *,
                          version_id: str | None = None) -> ObjectInfo: ...

    async def list_objects(self, bucket: str, *, prefix: str, delimiter: str, max_keys: int,
                           after: str) -> ListPage: ...

    async def expire_object(self, bucket: str, key: str, *, etag: str, last_modified: float,
                            version_id: str | None) -> DeleteOutcome | None: ...

    async def list_object_versions(self, bucket: str, *, prefix: str, delimiter: str,
                                   max_keys: int, key_marker: str,
                                   version_id_marker: str) -> VersionPage: ...

    async def delete_object(self, bucket: str, key: str, *,
                            version_id: str | None = None) -> DeleteOutcome: ...

    async def list_multipart_uploads(self, bucket: str, *, prefix: str, delimiter: str,
                                     max_uploads: int, key_marker: str,
                                     upload_id_marker: str) -> UploadPage: ...

    async def abort_multipart_upload(self, bucket: str, key: str, upload_id: str) -> None: ...


@dataclass
class LifecycleCounts:
    objects_expired: int = 0
    versions_expired: int = 0
    delete_markers_expired: int = 0
    uploads_aborted: int = 0
    scans: int = 0
    errors: int = 0


class _Metrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, registry=registry)
        self.objects = counter("squall_lifecycle_objects_expired",
                               "current objects expired by lifecycle rules")
        self.versions = counter("squall_lifecycle_versions_expired",
                                "noncurrent versions deleted by lifecycle rules")
        self.markers = counter("squall_lifecycle_delete_markers_expired",
                               "expired object delete markers removed by lifecycle rules")
        self.uploads = counter("squall_lifecycle_uploads_aborted",
                               "incomplete multipart uploads aborted by lifecycle rules")
        self.scans = counter("squall_lifecycle_scans", "lifecycle scans completed")


def _everything(_bucket: str, _key: str) -> bool:
    return True


class LifecycleScanner:
    """Enforces lifecycle rules in the background; started and stopped with the gateway."""

    def __init__(self, service: LifecycleTarget, *, interval: float, day_seconds: float = DAY,
                 owns: Callable[[str, str], bool] = _everything,
                 registry: CollectorRegistry | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._service = service
        self._interval = interval
        self._day = day_seconds
        self._owns = owns
        self._clock = clock
        self._metrics = _Metrics(registry)
        self.counts = LifecycleCounts()
        self._loop = PeriodicTask(self._scan_counted, every=interval, wait_first=True,
                                  name="lifecycle-scanner")
        self._last_scan: tuple[float, float] | None = None  # (started, seconds)
        self._last_error: str | None = None

    async def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    def status(self) -> dict[str, object]:
        status: dict[str, object] = {"interval_s": self._interval,
                                     "day_seconds": self._day, **asdict(self.counts)}
        if self._last_scan is not None:
            status["last_scan"] = {"started": round(self._last_scan[0], 3),
                                   "seconds": round(self._last_scan[1], 3)}
        status["last_error"] = self._last_error
        return status

    async def _scan_counted(self) -> None:
        try:
            await self.scan()
        except Exception as exc:  # noqa: BLE001 - retried at the next interval
            self.counts.errors += 1
            self._last_error = f"{type(exc).__name__}: {exc}"
            log.warning("lifecycle scan failed: %s", self._last_error)

    async def scan(self) -> None:
        """One pass over every bucket with enabled rules."""
        started = time.monotonic()
        now = self._clock()
        for info in await self._service.list_buckets():
            try:
                rules = [r for r in await self._service.lifecycle_rules(info.name) or ()
                         if r.enabled]
                if rules:
                    await self._scan_bucket(info.name, rules, now)
            except StorageError as exc:  # e.g. a member down: this bucket waits a scan
                self.counts.errors += 1
                self._last_error = f"{info.name}: {type(exc).__name__}: {exc.message}"
                log.warning("lifecycle scan of bucket %s failed: %s", info.name,
                            self._last_error)
        self.counts.scans += 1
        self._metrics.scans.inc()
        self._last_scan = (now, time.monotonic() - started)

    async def _scan_bucket(self, bucket: str, rules: Sequence[Rule], now: float) -> None:
        expiring = [r for r in rules if r.expiration_days is not None
                    or r.expiration_date_epoch is not None or r.expired_object_delete_marker
                    or r.noncurrent_days is not None]
        if expiring:
            prefix = os.path.commonprefix([r.filter.prefix for r in expiring])
            status = await self._service.get_bucket_versioning(bucket)
            if status is VersioningStatus.UNVERSIONED:
                await self._expire_objects(bucket, expiring, prefix, now)
            else:
                await self._expire_versions(bucket, expiring, prefix, now)
        aborting = [r for r in rules if r.abort_days is not None]
        if aborting:
            prefix = os.path.commonprefix([r.filter.prefix for r in aborting])
            await self._abort_uploads(bucket, aborting, prefix, now)

    # -- matching ----------------------------------------------------------------------

    async def _tags(self, bucket: str, info: ObjectInfo, rules: Sequence[Rule]
                    ) -> Mapping[str, str] | None:
        """The object's tags when a rule filters on them (listings do not carry them)."""
        if not any(r.needs_tags and r.filter.matches_key(info.key) for r in rules):
            return None
        try:
            head = await self._service.head_object(bucket, info.key,
                                                   version_id=info.version_id)
        except (NoSuchKey, NoSuchVersion):
            return {}
        return head.meta.tags

    async def _matching(self, bucket: str, info: ObjectInfo, rules: Sequence[Rule]
                        ) -> list[Rule]:
        tags = await self._tags(bucket, info, rules)
        return [r for r in rules if r.filter.matches(info.key, info.size, tags)]

    # -- unversioned buckets -----------------------------------------------------------

    async def _expire_objects(self, bucket: str, rules: Sequence[Rule], prefix: str,
                              now: float) -> None:
        after = ""
        while True:
            page = await self._service.list_objects(bucket, prefix=prefix, delimiter="",
                                                    max_keys=PAGE, after=after)
            for info in page.objects:
                if self._owns(bucket, info.key):
                    await self._expire_current(bucket, info, rules, now)
            if not page.is_truncated or page.next_marker is None:
                return
            after = page.next_marker

    async def _expire_current(self, bucket: str, info: ObjectInfo, rules: Sequence[Rule],
                              now: float) -> bool:
        matching = await self._matching(bucket, info, rules)
        if not any(r.expires_current(info.last_modified, now, self._day) for r in matching):
            return False
        outcome = await self._service.expire_object(
            bucket, info.key, etag=info.etag, last_modified=info.last_modified,
            version_id=info.version_id)
        if outcome is None:
            return False  # changed or being written since it was listed: not expired
        self.counts.objects_expired += 1
        self._metrics.objects.inc()
        return True

    # -- versioned buckets -------------------------------------------------------------

    async def _expire_versions(self, bucket: str, rules: Sequence[Rule], prefix: str,
                               now: float) -> None:
        key_marker = version_marker = ""
        group: list[VersionEntry] = []
        while True:
            page = await self._service.list_object_versions(
                bucket, prefix=prefix, delimiter="", max_keys=PAGE, key_marker=key_marker,
                version_id_marker=version_marker)
            for entry in page.entries:
                if group and entry.info.key != group[0].info.key:
                    await self._key_versions(bucket, group, rules, now)
                    group = []
                group.append(entry)
            if not page.is_truncated or page.next_key_marker is None:
                break
            key_marker = page.next_key_marker
            version_marker = page.next_version_id_marker or ""
        if group:
            await self._key_versions(bucket, group, rules, now)

    async def _key_versions(self, bucket: str, versions: Sequence[VersionEntry],
                            rules: Sequence[Rule], now: float) -> None:
        """Every version of one key, newest first (the latest one first)."""
        key = versions[0].info.key
        if not self._owns(bucket, key) or not versions[0].is_latest:
            return
        latest = versions[0]
        if latest.delete_marker:
            if len(versions) == 1:
                await self._expire_lone_marker(bucket, latest, rules, now)
                return
        elif await self._expire_current(bucket, latest.info, rules, now):
            return  # the latest just became noncurrent; older ones wait for the next scan
        for newer, (entry, older) in enumerate(zip(versions[1:], versions, strict=False)):
            matching = await self._matching(bucket, entry.info, rules)
            since = older.info.last_modified  # when the next newer version was made
            if any(r.expires_noncurrent(since, newer, now, self._day) for r in matching):
                await self._delete_version(bucket, entry)

    async def _expire_lone_marker(self, bucket: str, marker: VersionEntry,
                                  rules: Sequence[Rule], now: float) -> None:
        matching = [r for r in rules if r.filter.matches(marker.info.key, 0)]
        if any(r.expires_lone_marker(marker.info.last_modified, now, self._day)
               for r in matching):
            await self._delete_version(bucket, marker)

    async def _delete_version(self, bucket: str, entry: VersionEntry) -> None:
        """Delete one version by its id: exactly that version, whatever was written
        since it was listed."""
        await self._service.delete_object(bucket, entry.info.key,
                                          version_id=entry.info.version_id)
        if entry.delete_marker:
            self.counts.delete_markers_expired += 1
            self._metrics.markers.inc()
        else:
            self.counts.versions_expired += 1
            self._metrics.versions.inc()

    # -- multipart uploads -------------------------------------------------------------

    async def _abort_uploads(self, bucket: str, rules: Sequence[Rule], prefix: str,
                             now: float) -> None:
        key_marker = upload_marker = ""
        while True:
            page = await self._service.list_multipart_uploads(
                bucket, prefix=prefix, delimiter="", max_uploads=PAGE, key_marker=key_marker,
                upload_id_marker=upload_marker)
            for upload in page.uploads:
                if not self._owns(bucket, upload.key):
                    continue  # the key's owner aborts it, once
                if not any(r.filter.matches_key(upload.key)
                           and r.aborts_upload(upload.initiated, now, self._day)
                           for r in rules):
                    continue
                try:
                    await self._service.abort_multipart_upload(bucket, upload.key,
                                                               upload.upload_id)
                except NoSuchUpload:
                    continue  # completed or aborted meanwhile
                self.counts.uploads_aborted += 1
                self._metrics.uploads.inc()
            if not page.is_truncated or page.next_key_marker is None:
                return
            key_marker = page.next_key_marker
            upload_marker = page.next_upload_id_marker or ""
