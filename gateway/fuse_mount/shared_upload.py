"""The one multipart upload of a shared file (``--shared-files``), coordinated through its
sidecar object, with writer leases. docs/fuse-mount.md, "N-1 checkpoints", has the design.

The sidecar ``.squall-shared/<key>.json`` holds ``{upload_id, part_size, updated, writers:
{mount id: {open, end, expires}}}`` and is only ever replaced by a compare-and-swap
(``PutObject`` with ``If-None-Match: *`` or ``If-Match`` its ETag, retried on 412).

Leases: an open writer's entry expires ``lease`` seconds after its last renewal (a
:class:`LeaseRenewer` thread per mount renews every open shared file a third of the way
into its lease). A sidecar with no open writer whose lease runs is either being completed
(or aborted) by its last writer or was left by mounts that died; it is taken for the
latter once nobody changed it for a whole lease: a mount that opens the file then starts a
new upload in its place (the old one and its fragments are dropped: the write it belonged
to never finished). The last live writer to close aborts instead of completing when a
writer that never closed has expired (its parts may be missing): its close fails with EIO
and the previous version of the object stays. Times are the gateway's (each mount reads
its clock from the ``Date`` of the sidecar requests, :mod:`gateway_clock`): the mounts' own
clocks need not agree.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

from backends.core.errors import NoSuchKey, PreconditionFailed
from gateway.fuse_mount.errors import UploadFailed
from gateway.fuse_mount.store import BucketClient, Part

log = logging.getLogger(__name__)

SHARED_PREFIX = ".squall-shared/"
CAS_ATTEMPTS = 100
DEFAULT_LEASE = 60.0
WAIT_STEP = 0.1  # seconds between looks at a sidecar that is being completed


def sidecar_key(key: str) -> str:
    return f"{SHARED_PREFIX}{key}.json"


def fragment_prefix(key: str, upload_id: str) -> str:
    return f"{SHARED_PREFIX}{key}.parts/{upload_id}/"


class Ranges:
    """A set of byte ranges ``[start, end)``, merged."""

    def __init__(self) -> None:
        self._ranges: list[tuple[int, int]] = []

    def add(self, start: int, end: int) -> None:
        merged: list[tuple[int, int]] = []
        for s, e in self._ranges:
            if e < start or s > end:
                merged.append((s, e))
            else:
                start, end = min(s, start), max(e, end)
        merged.append((start, end))
        self._ranges = sorted(merged)

    def within(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of the set inside ``[start, end)``."""
        return [(max(s, start), min(e, end)) for s, e in self._ranges if s < end and e > start]

    @property
    def end(self) -> int:
        return self._ranges[-1][1] if self._ranges else 0


def _live(writer: Mapping[str, Any], now: float) -> bool:
    """An open writer whose lease runs (an entry without one, from an older mount, never
    expires)."""
    return bool(writer["open"]) and float(writer.get("expires", float("inf"))) > now


class SharedUpload:
    """This mount's share of the one multipart upload of a shared file."""

    def __init__(self, store: BucketClient, key: str, *, writer: str, part_size: int,
                 lease: float = DEFAULT_LEASE) -> None:
        self._store = store
        self.key = key
        self._writer = writer
        self._sidecar = sidecar_key(key)
        self._lease = lease
        self.upload_id = ""
        self.part_size = part_size
        self.joined = False
        #: the sidecar no longer holds this writer's open entry (taken over, or removed):
        #: what it wrote here cannot be part of the object any more.
        self.lost = False

    @property
    def renew_every(self) -> float:
        return self._lease / 3

    def join(self) -> None:
        """Become an open writer of the file's upload (creating both, or replacing a
        stale one)."""
        attempts = 0
        while attempts < CAS_ATTEMPTS:
            try:
                body, etag = self._store.get_small(self._sidecar)
            except NoSuchKey:
                if self._start(None):
                    return
                attempts += 1
                continue
            state, now = json.loads(body), self._store.clock.now()
            if not any(_live(w, now) for w in state["writers"].values()):
                if now - float(state.get("updated", 0)) < self._lease:
                    time.sleep(WAIT_STEP)  # its last writer completes or aborts it now
                    continue
                if self._start(etag, stale=state):
                    return
                attempts += 1
                continue
            state["writers"][self._writer] = self._entry(True, 0, now)
            state["updated"] = now
            if self._swap(state, etag):
                self.upload_id, self.part_size = state["upload_id"], int(state["part_size"])
                self.joined, self.lost = True, False
                return
            attempts += 1
        raise UploadFailed(resource=self.key)

    def renew(self) -> None:
        """Extend this writer's lease (the renewer thread); sets ``lost`` when the sidecar
        no longer holds this writer open in this upload."""
        for _ in range(CAS_ATTEMPTS):
            if not self.joined:
                return
            found = self._read_mine()
            if found is None:
                return
            state, etag, mine, now = found
            mine["expires"] = now + self._lease
            state["updated"] = now
            if self._swap(state, etag):
                return
        log.warning("%s: could not renew this mount's lease (the sidecar kept changing)",
                    self.key)

    def send(self, fd: int, ranges: Ranges, indexes: set[int]) -> None:
        """Upload what this mount wrote of parts ``indexes`` (read from ``fd``)."""
        self._check()
        size = self.part_size
        for i in sorted(indexes):
            lo, hi = i * size, (i + 1) * size
            pieces = ranges.within(lo, hi)
            if pieces == [(lo, hi)]:
                self.send_part(fd, i)
                continue
            for start, end in pieces:
                name = f"{fragment_prefix(self.key, self.upload_id)}{i:06d}-{start}-{end}"
                self._store.put(name, os.pread(fd, end - start, start), {})

    def send_part(self, fd: int, index: int) -> None:
        """Upload part ``index``, which this mount wrote whole (read from ``fd``)."""
        self._check()
        size = self.part_size
        self._store.upload_part(self.key, self.upload_id, index + 1,
                                os.pread(fd, size, index * size))

    def leave(self, end: int) -> bool:
        """This mount closed the file (it wrote up to ``end``); completes the upload when
        no live writer is left (or aborts it, with UploadFailed, when a writer that never
        closed has expired). Returns True if this call completed it."""
        for _ in range(CAS_ATTEMPTS):
            self._check()
            found = self._read_mine()
            if found is None:
                continue  # lost: the next _check raises
            state, etag, mine, now = found
            writers = state["writers"]
            ended = max(end, int(mine.get("end", 0)))
            writers[self._writer] = self._entry(False, ended, now)
            state["updated"] = now
            if not self._swap(state, etag):
                continue
            self.joined = False
            if any(_live(w, now) for w in writers.values()):
                return False
            dead = sorted(n for n, w in writers.items() if w["open"])
            if dead:
                log.error("%s: writers %s stopped renewing their leases before closing: "
                          "the upload is aborted and the previous version stays",
                          self.key, ", ".join(dead))
                self._discard(self.upload_id)
                self._store.delete(self._sidecar)
                raise UploadFailed(resource=self.key)
            self._complete(max(int(w["end"]) for w in writers.values()))
            return True
        raise UploadFailed(resource=self.key)

    def settle(self) -> bool:
        """After this writer left without being the last (the renewer asks every renewal
        interval): True once the upload needs nothing more from this mount: completed,
        taken over, written again here, or aborted here because every writer still open
        stopped renewing (nobody else would complete it)."""
        if self.joined:
            return True
        try:
            body, etag = self._store.get_small(self._sidecar)
        except NoSuchKey:
            return True
        state, now = json.loads(body), self._store.clock.now()
        writers = state["writers"]
        if state["upload_id"] != self.upload_id or "aborting" in state:
            return True
        if any(_live(w, now) for w in writers.values()):
            return False
        dead = sorted(n for n, w in writers.items() if w["open"])
        if not dead:
            return True  # its last writer completes it
        state["aborting"], state["updated"] = self._writer, now
        if not self._swap(state, etag):
            return False  # changed meanwhile: looked at again next round
        log.error("%s: writers %s stopped renewing their leases before closing, after "
                  "this mount closed: the upload is aborted and the previous version "
                  "stays", self.key, ", ".join(dead))
        self._discard(self.upload_id)
        self._store.delete(self._sidecar)
        return True

    # -- helpers ---------------------------------------------------------------------------
    def _read_mine(self) -> tuple[dict[str, Any], str, dict[str, Any], float] | None:
        """(sidecar state, its ETag, this writer's entry, now); None (and ``lost``) when
        the sidecar no longer holds this writer open in this upload."""
        try:
            body, etag = self._store.get_small(self._sidecar)
        except NoSuchKey:
            self._lose("its sidecar is gone")
            return None
        state = json.loads(body)
        mine = state["writers"].get(self._writer)
        if state["upload_id"] != self.upload_id or not mine or not mine["open"]:
            self._lose("another mount took the upload over")
            return None
        return state, etag, mine, self._store.clock.now()

    def _entry(self, open_: bool, end: int, now: float) -> dict[str, Any]:
        return {"open": open_, "end": end, "expires": now + self._lease}

    def _start(self, etag: str | None, *, stale: Mapping[str, Any] | None = None) -> bool:
        """Create a new upload and its sidecar (in place of the stale one with ETag
        ``etag``); False when another mount changed the sidecar first."""
        upload = self._store.create_upload(self.key, {})
        now = self._store.clock.now()
        state = {"upload_id": upload, "part_size": self.part_size, "updated": now,
                 "writers": {self._writer: self._entry(True, 0, now)}}
        try:
            if etag is None:
                self._store.put_if(self._sidecar, _dump(state), if_none_match="*")
            else:
                self._store.put_if(self._sidecar, _dump(state), if_match=etag)
        except (PreconditionFailed, NoSuchKey):
            self._store.abort_upload(self.key, upload)
            time.sleep(0.005)
            return False
        if stale is not None:
            log.warning("%s: took over a shared upload whose writers stopped renewing "
                        "their leases (%s); what they wrote is dropped", self.key,
                        ", ".join(sorted(stale["writers"])))
            self._discard(str(stale["upload_id"]))
        self.upload_id, self.joined, self.lost = upload, True, False
        return True

    def _discard(self, upload_id: str) -> None:
        """Abort ``upload_id`` and delete its fragments (best effort: a lifecycle rule
        aborts what is left)."""
        try:
            self._store.abort_upload(self.key, upload_id)
            for name in self._fragments(upload_id):
                self._store.delete(name)
        except Exception as exc:  # noqa: BLE001 - logged; the new upload goes on
            log.warning("%s: could not remove the abandoned upload %s: %r", self.key,
                        upload_id, exc)

    def _fragments(self, upload_id: str) -> Iterator[str]:
        for page in self._store.list_dir(fragment_prefix(self.key, upload_id), delimiter=""):
            for o in page.objects:
                yield o.key

    def _complete(self, size: int) -> None:
        part = self.part_size
        count = max(1, -(-size // part))
        uploaded = {p.number: p for p in self._store.list_parts(self.key, self.upload_id)}
        prefix = fragment_prefix(self.key, self.upload_id)
        fragments: dict[int, list[tuple[int, int, str]]] = {}
        for name in self._fragments(self.upload_id):
            index, start, end = (int(x) for x in name[len(prefix):].split("-"))
            fragments.setdefault(index, []).append((start, end, name))
        parts: list[Part] = []
        for i in range(count):
            if i + 1 in uploaded:  # written whole by one mount (then nobody else wrote it)
                parts.append(uploaded[i + 1])
                continue
            lo = i * part
            buf = bytearray(min(size, lo + part) - lo)
            for start, end, name in fragments.get(i, []):
                buf[start - lo:end - lo] = self._store.get_range(name, 0, end - start)
            parts.append(self._store.upload_part(self.key, self.upload_id, i + 1, buf))
        self._store.complete_upload(self.key, self.upload_id, parts)
        for names in fragments.values():
            for _, _, name in names:
                self._store.delete(name)
        self._store.delete(self._sidecar)

    def _lose(self, why: str) -> None:
        if not self.lost:
            log.error("%s: this mount's writes can no longer be stored: %s (its lease "
                      "expired?)", self.key, why)
        self.lost, self.joined = True, False

    def _check(self) -> None:
        if self.lost:
            raise UploadFailed(resource=self.key)

    def _swap(self, state: Mapping[str, Any], etag: str) -> bool:
        try:
            self._store.put_if(self._sidecar, _dump(state), if_match=etag)
        except (PreconditionFailed, NoSuchKey):
            time.sleep(0.005)
            return False
        return True


def _dump(state: Mapping[str, Any]) -> bytes:
    return json.dumps(state, sort_keys=True).encode()


class LeaseRenewer:
    """One thread per mount renewing the leases of the shared files it writes."""

    def __init__(self) -> None:
        self._uploads: weakref.WeakSet[SharedUpload] = weakref.WeakSet()
        self._watched: set[SharedUpload] = set()  # left here, not completed yet
        self._due: weakref.WeakKeyDictionary[SharedUpload, float] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, upload: SharedUpload) -> None:
        """Renew ``upload``'s lease until :meth:`remove`."""
        with self._lock:
            self._uploads.add(upload)
            self._schedule(upload)
        self._wake.set()

    def remove(self, upload: SharedUpload) -> None:
        with self._lock:
            self._uploads.discard(upload)

    def watch(self, upload: SharedUpload) -> None:
        """``upload`` was left here by a writer that was not the last: look at it every
        renewal interval until :meth:`SharedUpload.settle` says it is settled."""
        with self._lock:
            self._watched.add(upload)
            self._schedule(upload)
        self._wake.set()

    def _schedule(self, upload: SharedUpload) -> None:
        """(under the lock) ``upload`` is due one renewal interval from now."""
        self._due[upload] = time.monotonic() + upload.renew_every
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="shared-leases",
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                renewed, watched = list(self._uploads), list(self._watched)
            uploads = renewed + watched
            now = time.monotonic()
            for upload in uploads:
                if self._due.get(upload, now) > now:
                    continue
                self._due[upload] = now + upload.renew_every
                try:
                    if upload in self._watched:
                        if upload.settle():
                            with self._lock:
                                self._watched.discard(upload)
                    else:
                        upload.renew()
                except Exception as exc:  # noqa: BLE001 - tried again next round
                    log.warning("%s: lease renewal failed: %r", upload.key, exc)
            wait = min((self._due.get(u, now + 1.0) for u in uploads), default=now + 60.0)
            self._wake.wait(max(0.05, wait - time.monotonic()))
            self._wake.clear()
