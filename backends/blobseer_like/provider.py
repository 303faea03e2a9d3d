"""One provider: a directory (a disk, a mount, an NFS export) holding chunks and records.

Blocking methods run in worker threads (``run_blocking``); :meth:`Provider.write` and
:meth:`Provider.read` are the async, throttled data path. Layout: docs/blobseer-like.md.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from awscrt.checksums import crc64nvme

from backends.blobseer_like import format as fmt
from backends.core.blocking import run_blocking
from backends.core.errors import BackendError
from backends.files import (
    FILE_MODE,
    O_CREATE,
    O_READ,
    fsync_dir,
    read_small,
    remove_tree,
    write_all,
    write_atomic,
)
from backends.throttle import TokenBucket

_SHARD_SET = {f"{i:02x}" for i in range(256)}


class ChunkCorrupted(BackendError):
    """A chunk failed its checksum: the data is not returned."""


class ChunkMissing(BackendError):
    """A chunk a version refers to is missing from its provider."""


class ProviderError(ValueError):
    """A directory cannot be used as a provider of this store (the message says why)."""


def crc_of(data: bytes | bytearray | memoryview) -> int:
    return int(crc64nvme(data, 0))


class Provider:
    """A formatted provider directory of one store, locked by this process while open."""

    def __init__(self, path: Path, provider_id: str, *, durable: bool,
                 cap: float | None = None, state: str = "active") -> None:
        self.path = path
        self.id = provider_id
        self.state = state
        self.durable = durable
        self.cap = cap
        # A tenth of a second of burst allowance, as the gateway's backend throttle.
        self.throttle = TokenBucket(cap, cap / 10) if cap else None
        self.bytes_written = 0
        self.bytes_read = 0
        self.queued = 0  # bytes of chunk writes waiting for or in progress on this provider
        self._lock_fd = -1
        self._shards: set[Path] = set()  # shard directories known to exist durably

    # -- formatting and locking (blocking) -------------------------------------------

    @staticmethod
    def identify(path: Path) -> tuple[str, str] | None:
        """(store id, provider id) of a formatted provider, None if ``path`` is not one."""
        try:
            data = fmt.loads(read_small(path / fmt.IDENTITY), fmt.PROVIDER_MAGIC)
        except FileNotFoundError:
            return None
        except (OSError, fmt.FormatError) as exc:
            raise ProviderError(f"{path}: unreadable provider identity: {exc}") from exc
        store, provider = data.get("store"), data.get("provider")
        if not isinstance(store, str) or not isinstance(provider, str):
            raise ProviderError(f"{path}: provider identity lacks store/provider ids")
        return store, provider

    @staticmethod
    def format(path: Path, store_id: str, *, durable: bool) -> str:
        """Make an empty (or missing) directory a provider of ``store_id``; its new id."""
        try:
            path.mkdir(parents=True, exist_ok=True)
            leftovers = [n for n in os.listdir(path) if n not in ("lost+found", fmt.TMP)]
        except OSError as exc:
            raise ProviderError(f"{path}: cannot create or read the directory: "
                                f"{exc.strerror}") from exc
        if leftovers:
            raise ProviderError(f"{path} is not empty and not a blobseer_like provider; "
                                "give an empty or new directory")
        provider_id = fmt.new_id()[:12]
        try:
            for name in (fmt.TMP, fmt.CHUNKS, fmt.RECORDS, fmt.BUCKETS, fmt.UPLOADS):
                (path / name).mkdir(exist_ok=True)
            identity = fmt.dumps({"magic": fmt.PROVIDER_MAGIC, "v": fmt.VERSION,
                                  "store": store_id, "provider": provider_id,
                                  "created_ns": time.time_ns()})
            # The identity is written last: a directory without it is not yet a provider.
            write_atomic(path / fmt.IDENTITY, identity, tmp_dir=path / fmt.TMP,
                         durable=durable)
        except OSError as exc:
            raise ProviderError(f"{path}: cannot format the provider: {exc.strerror}") from exc
        return provider_id

    def lock(self) -> None:
        """Take this process's exclusive lock on the provider (ProviderError if taken)."""
        try:
            fd = os.open(self.path / fmt.LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise ProviderError(f"{self.path}: cannot open the lock file: {exc.strerror}") \
                from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise ProviderError(f"provider {self.path} is in use by another process "
                                    "(a running gateway or fsck)") from exc
            raise ProviderError(f"{self.path}: cannot lock: {exc.strerror}") from exc
        self._lock_fd = fd

    def unlock(self) -> None:
        fd, self._lock_fd = self._lock_fd, -1
        if fd >= 0:
            os.close(fd)  # releases the flock

    # -- chunks ----------------------------------------------------------------------

    def _shard(self, top: str, shard: str) -> Path:
        """Blocking: the shard directory ``top/shard``, created (durably) on first use."""
        directory = self.path / top / shard
        if directory not in self._shards:
            try:
                directory.mkdir()
                if self.durable:
                    fsync_dir(directory.parent)
            except FileExistsError:
                pass
            self._shards.add(directory)
        return directory

    def _shard_names(self, top: str) -> list[str]:
        return sorted(n for n in os.listdir(self.path / top) if n in _SHARD_SET)

    def chunk_path(self, chunk_id: str) -> Path:
        return self.path / fmt.CHUNKS / chunk_id[:2] / chunk_id

    def write_chunk(self, chunk_id: str, data: bytes | bytearray | memoryview) -> int:
        """Blocking: store a new chunk (header + data, fdatasync if durable); its CRC."""
        crc = crc_of(data)
        fd = os.open(self._shard(fmt.CHUNKS, chunk_id[:2]) / chunk_id, O_CREATE, FILE_MODE)
        try:
            write_all(fd, fmt.pack_chunk_header(len(data), crc))
            write_all(fd, data)
            if self.durable:
                os.fdatasync(fd)
        finally:
            os.close(fd)
        self.bytes_written += len(data)
        return crc

    def sync_shard(self, shard: str) -> None:
        """Blocking: make the names of chunks written into ``shard`` durable."""
        if self.durable:
            fsync_dir(self.path / fmt.CHUNKS / shard)

    def read_chunk(self, chunk_id: str, size: int, crc: int) -> bytes:
        """Blocking: a chunk's data, verified against ``size`` and ``crc`` (and its header)."""
        where = f"chunk {chunk_id} on provider {self.id} ({self.path})"
        try:
            fd = os.open(self.chunk_path(chunk_id), O_READ)
        except FileNotFoundError as exc:
            raise ChunkMissing(f"{where} is missing.") from exc
        try:
            blob = os.pread(fd, fmt.CHUNK_HEADER.size + size + 1, 0)
        finally:
            os.close(fd)
        try:
            length, stored_crc = fmt.unpack_chunk_header(blob)
        except fmt.FormatError as exc:
            raise ChunkCorrupted(f"{where} is corrupted: {exc}.") from exc
        data = blob[fmt.CHUNK_HEADER.size:]
        if length != size or len(data) != size or stored_crc != crc or crc_of(data) != crc:
            raise ChunkCorrupted(f"{where} is corrupted: its checksum does not match.")
        self.bytes_read += size
        return data

    def verify_chunk(self, chunk_id: str) -> str | None:
        """Blocking: None if the chunk file is intact by its own header, else the problem."""
        try:
            blob = self.chunk_path(chunk_id).read_bytes()
            length, crc = fmt.unpack_chunk_header(blob)
        except (OSError, fmt.FormatError) as exc:
            return str(exc)
        data = blob[fmt.CHUNK_HEADER.size:]
        if len(data) != length or crc_of(data) != crc:
            return "checksum mismatch"
        return None

    def delete_chunk(self, chunk_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.chunk_path(chunk_id))

    def chunk_ids(self) -> Iterator[str]:
        for shard in self._shard_names(fmt.CHUNKS):
            try:
                with os.scandir(self.path / fmt.CHUNKS / shard) as entries:
                    yield from (e.name for e in entries)
            except FileNotFoundError:
                continue

    # -- records (small files written temp + fsync + rename) ------------------------

    def record_path(self, name: str) -> Path:
        return self.path / fmt.RECORDS / name[-2:] / name

    def write_record(self, name: str, data: bytes) -> None:
        self._shard(fmt.RECORDS, name[-2:])
        self.write_file(self.record_path(name), data)

    def write_file(self, path: Path, data: bytes) -> None:
        write_atomic(path, data, tmp_dir=self.path / fmt.TMP, durable=self.durable)

    def unlink(self, path: Path) -> None:
        """Blocking: remove a file (a missing one is fine); the removal is made durable."""
        try:
            os.unlink(path)
        except FileNotFoundError:
            return
        if self.durable:
            fsync_dir(path.parent)

    def record_names(self) -> Iterator[str]:
        for shard in self._shard_names(fmt.RECORDS):
            try:
                with os.scandir(self.path / fmt.RECORDS / shard) as entries:
                    yield from (e.name for e in entries if not e.name.startswith("."))
            except FileNotFoundError:
                continue

    def bucket_path(self, bucket: str) -> Path:
        return self.path / fmt.BUCKETS / bucket

    def bucket_names(self) -> list[str]:
        return sorted(os.listdir(self.path / fmt.BUCKETS))

    def upload_dir(self, upload_id: str) -> Path:
        return self.path / fmt.UPLOADS / upload_id

    def upload_ids(self) -> list[str]:
        return sorted(os.listdir(self.path / fmt.UPLOADS))

    def upload_files(self, upload_id: str) -> set[str]:
        try:
            return set(os.listdir(self.upload_dir(upload_id)))
        except FileNotFoundError:
            return set()

    def make_upload_dir(self, upload_id: str) -> None:
        self.upload_dir(upload_id).mkdir(exist_ok=True)
        if self.durable:
            fsync_dir(self.path / fmt.UPLOADS)

    def remove_upload_dir(self, upload_id: str) -> None:
        """Blocking: the upload record first (the upload is gone on a rebuild), then all."""
        self.unlink(self.upload_dir(upload_id) / fmt.UPLOAD_RECORD)
        remove_tree(self.upload_dir(upload_id))

    def clear_tmp(self) -> None:
        """Blocking: drop temp files a crash left behind (called while locked, at open)."""
        tmp = self.path / fmt.TMP
        for name in os.listdir(tmp):
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                os.unlink(tmp / name)

    # -- the async, throttled data path ---------------------------------------------

    async def write(self, chunk_id: str, data: bytes | bytearray | memoryview) -> int:
        """Store a chunk within the provider's bandwidth cap; its CRC."""
        self.queued += len(data)
        try:
            if self.throttle is not None:
                await self.throttle.acquire(len(data))
            return await run_blocking(self.write_chunk, chunk_id, data)
        finally:
            self.queued -= len(data)

    async def read(self, chunk_id: str, size: int, crc: int) -> bytes:
        """A verified chunk, within the provider's bandwidth cap."""
        if self.throttle is not None:
            await self.throttle.acquire(size)
        return await run_blocking(self.read_chunk, chunk_id, size, crc)
