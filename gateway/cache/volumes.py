"""Cache volumes and the data-file format (blocking helpers; call via ``run_cache_blocking``).

A volume is a directory holding ``squall-cache-volume.json`` (format, version, volume id),
``data/<xx>/<name>`` files and ``tmp/`` for files being written. A data file is a 16-byte
header (magic ``SQCACHE\\0``, u16 format version, u16 flags, u32 reserved; little endian)
followed by the payload. Files are written under ``tmp/``, fsynced and renamed into
``data/``; only files referenced by the index survive a restart (see :func:`sweep`).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import os
import struct
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from backends.core.blocking import run_cache_blocking
from backends.core.errors import BadDigest, ServiceUnavailable, SlowDown
from backends.core.regions import FileRegion
from backends.direct_io import DirectWriter
from backends.files import FILE_MODE, O_CREATE, device_of, pwrite_all

MAGIC = b"SQCACHE\0"
FILE_VERSION = 1
_HEADER = struct.Struct("<8sHHI")
HEADER_SIZE = _HEADER.size
VOLUME_MARKER = "squall-cache-volume.json"
VOLUME_FORMAT = "squall-cache-volume"
VOLUME_VERSION = 1


@contextlib.contextmanager
def volume_errors(what: str) -> Iterator[None]:
    """OSError on a cache volume -> SlowDown (out of space) or ServiceUnavailable."""
    try:
        yield
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise SlowDown(f"cache volume full while {what}", retry_after=5) from exc
        raise ServiceUnavailable(f"cache volume I/O error while {what}: {exc}") from exc


def charge(size: int) -> int:
    """Bytes a data file with ``size`` payload bytes takes from a volume's capacity."""
    return HEADER_SIZE + size


class Volume:
    """An opened cache volume and its space accounting: ``used`` counts committed files
    (also those still being read after their record went away) and ``inflight`` bytes
    reserved for files being written; ``claims`` are those writes."""

    def __init__(self, vol_id: str, path: Path, capacity: int) -> None:
        self.id = vol_id
        self.path = path
        self.capacity = capacity
        self.used = 0
        #: the most ``used`` has been since :meth:`take_peak` last read it
        self.peak = 0
        self.inflight = 0
        self.claims: set[Any] = set()
        #: elastic volumes: no new files are written here while it drains before detach
        self.retiring = False
        #: a token bucket (``acquire(n)``) capping writes, emulating the device's bandwidth
        self.limiter: Any = None
        self.data_dir = path / "data"
        self.tmp_dir = path / "tmp"
        #: the file system it is on (``st_dev``): a backend there shares its disk
        self.device = device_of(path)

    @property
    def free(self) -> int:
        return self.capacity - self.used

    def take_peak(self) -> int:
        """The most bytes used since the last call (a burst fills a volume between two
        control ticks: sampling ``used`` would miss its peak); starts over from now."""
        peak, self.peak = max(self.peak, self.used), self.used
        return peak

    def file_path(self, name: str) -> Path:
        return self.data_dir / name[:2] / name


def open_volume(path: Path, capacity: int) -> Volume:
    """Create or open the volume at ``path``; its id is kept in the marker file."""
    with volume_errors("opening a volume"):
        path.mkdir(parents=True, exist_ok=True)
        marker = path / VOLUME_MARKER
        if marker.exists():
            data = json.loads(marker.read_text())
            if data.get("format") != VOLUME_FORMAT or data.get("version") != VOLUME_VERSION:
                raise ServiceUnavailable(f"cache volume {path} has unsupported format {data!r}")
            vol_id = str(data["id"])
        else:
            vol_id = uuid.uuid4().hex
            tmp = path / (VOLUME_MARKER + ".tmp")
            with open(tmp, "w") as f:
                json.dump({"format": VOLUME_FORMAT, "version": VOLUME_VERSION, "id": vol_id}, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, marker)
            fsync_dir(path)
        (path / "data").mkdir(exist_ok=True)
        (path / "tmp").mkdir(exist_ok=True)
    return Volume(vol_id, path, capacity)


def fsync_dir(path: Path) -> None:
    """Make a directory's entries durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DataFileWriter:
    """Writes one data file: header, payload pieces (hashed with MD5, each batch written by
    one pwritev, never joined; with ``direct``, their aligned middle past the page cache:
    :mod:`backends.direct_io`), then commit. ``data``: the first pieces (saves a call)."""

    def __init__(self, volume: Volume, *, sync: bool, data: Sequence[bytes] = (),
                 direct: bool = False) -> None:
        self.volume = volume
        self.name = uuid.uuid4().hex
        self.size = 0
        self._sync = sync
        self._committed = False
        self._md5 = hashlib.md5()
        self._tmp = volume.tmp_dir / f"{self.name}.tmp"
        with volume_errors("creating a cache file"):
            self._fd = os.open(self._tmp, O_CREATE, FILE_MODE)
            self._writer = DirectWriter(self._tmp, self._fd, enabled=direct)
            try:
                pwrite_all(self._fd, _HEADER.pack(MAGIC, FILE_VERSION, 0, 0), 0)
            except BaseException:
                self.abort()
                raise
        if data:
            try:
                self.write(data)
            except BaseException:
                self.abort()
                raise

    @classmethod
    def whole(cls, volume: Volume, data: bytes, *, sync: bool,
              content_md5: bytes | None = None) -> DataFileWriter:
        """A committed file holding ``data`` (checked against ``content_md5``): one call."""
        writer = cls(volume, sync=sync)
        try:
            writer.finish((data,) if data else (), content_md5=content_md5)
        except BaseException:
            writer.abort()
            raise
        return writer

    def write(self, pieces: Sequence[bytes]) -> None:
        for piece in pieces:
            self._md5.update(piece)
        with volume_errors("writing a cache file"):
            self.size += self._writer.write(pieces, HEADER_SIZE + self.size)

    def md5(self) -> str:
        return self._md5.hexdigest()

    @property
    def tmp_path(self) -> Path:
        return self._tmp

    def finish(self, data: Sequence[bytes] = (), *, content_md5: bytes | None = None) -> None:
        """Write the last pieces ``data``, check the MD5 (BadDigest), then :meth:`commit`."""
        if data:
            self.write(data)
        if content_md5 is not None and not hmac.compare_digest(self._md5.digest(),
                                                               content_md5):
            raise BadDigest()
        self.commit()

    def commit(self) -> None:
        """Make the file durable (per ``sync``) under its final name."""
        with volume_errors("committing a cache file"):
            if self._sync:
                os.fsync(self._fd)
            self._close()
            final = self.volume.file_path(self.name)
            final.parent.mkdir(exist_ok=True)
            os.replace(self._tmp, final)
            self._committed = True
            if self._sync:
                fsync_dir(final.parent)

    def abort(self) -> None:
        """Remove the file (also after :meth:`commit`, if no record took it)."""
        with contextlib.suppress(OSError):
            self._close()
        with contextlib.suppress(OSError):
            os.unlink(self.volume.file_path(self.name) if self._committed else self._tmp)

    def _close(self) -> None:
        self._writer.close()
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


class DataFileReader:
    """Positional reads of one data file's payload; checks the header on open."""

    def __init__(self, volume: Volume, name: str) -> None:
        with volume_errors("opening a cache file"):
            self._fd = os.open(volume.file_path(name), os.O_RDONLY)
            header = os.pread(self._fd, HEADER_SIZE, 0)
        if len(header) != HEADER_SIZE or _HEADER.unpack(header)[:2] != (MAGIC, FILE_VERSION):
            os.close(self._fd)
            raise ServiceUnavailable(f"cache file {name} has a bad header")

    def read(self, offset: int, length: int) -> bytes:
        with volume_errors("reading a cache file"):
            data = os.pread(self._fd, length, HEADER_SIZE + offset)
        if len(data) != length:
            raise ServiceUnavailable("cache file shorter than its index entry")
        return data

    def region(self, offset: int, length: int) -> FileRegion:
        """``length`` payload bytes at ``offset`` as a region of the open file (sent by
        the server in the cache device's thread pool)."""
        return FileRegion(self._fd, HEADER_SIZE + offset, length, run_cache_blocking)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)

    @classmethod
    def open_read(cls, volume: Volume, name: str, offset: int,
                  length: int) -> tuple[DataFileReader, bytes]:
        """Open and read the first piece in one call (closed again if that fails)."""
        reader = cls(volume, name)
        try:
            return reader, reader.read(offset, length)
        except BaseException:
            reader.close()
            raise


def read_range(volume: Volume, name: str, offset: int, length: int) -> bytes:
    """Open a data file, check its header, read ``length`` payload bytes at ``offset`` and
    close it: one call for a small read."""
    reader = DataFileReader(volume, name)
    try:
        return reader.read(offset, length)
    finally:
        reader.close()


def file_ok(volume: Volume, name: str, size: int) -> bool:
    """Whether the data file exists with the expected length."""
    try:
        return volume.file_path(name).stat().st_size == charge(size)
    except OSError:
        return False


def unlink(volume: Volume, name: str) -> None:
    # A file that is not there (an inline segment's name) is fine: not an I/O error.
    with volume_errors("removing a cache file"), contextlib.suppress(FileNotFoundError):
        os.unlink(volume.file_path(name))


def sweep(volume: Volume, referenced: set[str]) -> int:
    """Delete temp files and data files the index does not reference; return how many."""
    removed = 0
    with volume_errors("sweeping a volume"):
        for tmp in volume.tmp_dir.iterdir():
            tmp.unlink(missing_ok=True)
            removed += 1
        for sub in volume.data_dir.iterdir():
            if not sub.is_dir():
                sub.unlink(missing_ok=True)
                removed += 1
                continue
            for f in sub.iterdir():
                if f.name not in referenced:
                    f.unlink(missing_ok=True)
                    removed += 1
    return removed
