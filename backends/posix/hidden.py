"""The hidden area ``<root>/.squall``: format marker, temp files, records, staging."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from backends.core.errors import BackendError
from backends.core.keys import INTERNAL_PREFIX
from backends.files import O_DIR, fsync_dir, read_small, remove_tree, write_atomic
from backends.posix import tree
from backends.posix.layout import FORMAT_VERSION

HIDDEN_NAME = ".squall"
FORMAT_MAGIC = "squall.posix"
STALE_TEMP_SECONDS = 24 * 3600  # temp files older than this at start-up are crash leftovers


@dataclass(frozen=True, slots=True)
class HiddenArea:
    """Paths of the hidden area; it lives inside the root, on the buckets' file system."""

    root: Path

    @property
    def base(self) -> Path:
        return self.root / HIDDEN_NAME

    @property
    def tmp(self) -> Path:
        return self.base / "tmp"

    @property
    def buckets(self) -> Path:
        return self.base / "buckets"

    @property
    def meta(self) -> Path:
        return self.base / "meta"

    @property
    def uploads(self) -> Path:
        return self.base / "uploads"

    @property
    def internal(self) -> Path:
        """Per-bucket trees of internal keys (version records, bucket settings)."""
        return self.base / "internal"

    def open_base(self, bucket: str, key: str, *, durable: bool) -> int:
        """Blocking: an fd of the directory ``key`` is stored under (caller closes).

        Client keys live in the bucket directory, internal keys (``INTERNAL_PREFIX``) in
        ``internal/<bucket>``, made on first use; NoSuchBucket without the bucket.
        """
        bucket_fd = tree.open_bucket(self.root, bucket)
        if not key.startswith(INTERNAL_PREFIX):
            return bucket_fd
        os.close(bucket_fd)
        path = self.internal / bucket
        try:
            return os.open(path, O_DIR)
        except FileNotFoundError:
            path.mkdir(exist_ok=True)
            if durable:
                fsync_dir(self.internal)
            return os.open(path, O_DIR)

    def prepare(self, *, durable: bool) -> None:
        """Create the area (blocking), check the format version, drop stale temp files."""
        self.root.mkdir(parents=True, exist_ok=True)
        for path in (self.base, self.tmp, self.buckets, self.meta, self.uploads,
                     self.internal):
            path.mkdir(exist_ok=True)
        marker = self.base / "format.json"
        try:
            data = json.loads(read_small(marker))
        except FileNotFoundError:
            blob = json.dumps({"magic": FORMAT_MAGIC, "version": FORMAT_VERSION}).encode()
            write_atomic(marker, blob, tmp_dir=self.tmp, durable=durable)
            if durable:
                fsync_dir(self.root)
            data = {"magic": FORMAT_MAGIC, "version": FORMAT_VERSION}
        except ValueError:
            data = None
        if (not isinstance(data, dict) or data.get("magic") != FORMAT_MAGIC
                or data.get("version") != FORMAT_VERSION):
            raise BackendError(f"{marker} does not describe posix layout format "
                               f"{FORMAT_VERSION}; refusing to use this tree.")
        self._drop_stale_temps()

    def _drop_stale_temps(self) -> None:
        horizon = time.time() - STALE_TEMP_SECONDS
        with os.scandir(self.tmp) as entries:
            for entry in entries:
                try:
                    if entry.stat(follow_symlinks=False).st_mtime >= horizon:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        remove_tree(Path(entry.path))
                    else:
                        os.unlink(entry.path)
                except FileNotFoundError:
                    continue
