"""A RocksDB database (rocksdict, raw mode) holding durable records: its failures become
our errors, and it is reopened after a failed write.

Blocking: meant to run through a worker thread. rocksdict holds the GIL while RocksDB
writes, including the WAL fsync of a synced write: callers batch their writes (group
commit, gateway/cache/commits.py) so that a busy process waits once per group.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import cast

from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from backends.core.errors import ServiceUnavailable, SlowDown

log = logging.getLogger(__name__)
FULL_DISK_BYTES = 1 << 20  # less free space than this: a failed write is a full disk


@contextlib.contextmanager
def translated(what: str, path: Path | None = None) -> Iterator[None]:
    """RocksDB's errors -> ours: SlowDown when the disk of ``what`` (at ``path``) is
    full, else ServiceUnavailable. RocksDB's text (file paths) goes to the log only."""
    try:
        yield
    except (ServiceUnavailable, SlowDown):
        raise
    except Exception as exc:  # rocksdict raises plain Exception subclasses
        log.error("%s failure: %s", what, exc)
        if path is not None and disk_full(path):
            raise SlowDown(f"the {what}'s disk is full", retry_after=5) from exc
        raise ServiceUnavailable(f"{what} failure", retry_after=5) from exc


def disk_full(path: Path) -> bool:
    try:
        st = os.statvfs(path)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < FULL_DISK_BYTES


class RocksDatabase:
    """An open database at ``path`` (made if missing), named ``what`` in errors.

    ``db`` is the rocksdict handle for reads. :meth:`write` applies a WriteBatch; after
    a failed write RocksDB refuses every write (e.g. its disk was full), so the next one
    reopens it first: writes work again once the cause is gone. What failed was never
    acknowledged; what was acknowledged is in the WAL and replayed by the reopen.
    """

    def __init__(self, path: Path, what: str) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.what = what
        self._reopening = threading.Lock()
        self._sync = WriteOptions()
        self._sync.sync = True
        self._nosync = WriteOptions()
        self._nosync.sync = False
        #: why the last write failed (None: it succeeded): writes cannot be acknowledged
        self.failure: str | None = None
        with translated(what):
            self.db = self._open()

    def _open(self) -> Rdict:
        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        return Rdict(str(self.path), opts)

    def get(self, key: bytes) -> bytes | None:
        with translated(self.what):
            return cast(bytes | None, self.db.get(key))  # raw mode: bytes

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every key and value, in key order."""
        with translated(self.what):
            for key, value in self.db.items():
                yield cast(bytes, key), cast(bytes, value)  # raw mode: bytes

    def write(self, batch: WriteBatch, *, sync: bool) -> None:
        """Apply ``batch`` atomically; with ``sync`` the WAL is fsynced before returning."""
        try:
            with translated(self.what, self.path):
                if self.failure is not None:
                    self._recover()
                self.db.write(batch, self._sync if sync else self._nosync)
        except (ServiceUnavailable, SlowDown) as exc:
            self.failure = exc.message
            raise
        self.failure = None

    def _recover(self) -> None:
        with self._reopening:
            if self.failure is None:
                return
            with contextlib.suppress(Exception):  # closing a failed DB reports its error
                self.db.close()
            self.db = self._open()
            log.warning("%s reopened after a write failure: %s", self.what, self.failure)

    def close(self) -> None:
        """Close the database (one whose last write failed, without its error)."""
        if self.failure is not None:
            with contextlib.suppress(Exception):
                self.db.close()
            return
        with translated(self.what):
            self.db.close()
