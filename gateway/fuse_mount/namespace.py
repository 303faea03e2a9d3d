"""Paths of the mount as S3 keys: lookups, listings, directories, renames, deletions.

A file ``/a/b`` is the object ``a/b``; a directory ``/a`` exists when an object ``a/``
(its marker, written by mkdir) or any key under ``a/`` exists. Nothing here knows about
open files: :mod:`gateway.fuse_mount.operations` handles those first.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator

from backends.errors import NoSuchKey
from gateway.fuse_mount.attrs import Attr, AttrCache
from gateway.fuse_mount.store import ObjectMeta, ObjectStore


class PathError(OSError):
    """A POSIX error about a path (ENOENT, EEXIST, ENOTEMPTY ...)."""

    def __init__(self, number: int, path: str) -> None:
        super().__init__(number, errno.errorcode.get(number, str(number)), path)


def key_of(path: str) -> str:
    return path.strip("/")


def path_of(key: str) -> str:
    return f"/{key}"


def dir_prefix(path: str) -> str:
    key = key_of(path)
    return f"{key}/" if key else ""


def join(path: str, name: str) -> str:
    return f"{path.rstrip('/')}/{name}"


class Namespace:
    """Namespace operations on one bucket, with an attribute cache in front of lookups."""

    def __init__(self, store: ObjectStore, cache: AttrCache) -> None:
        self._store = store
        self.cache = cache

    def lookup(self, path: str) -> Attr | None:
        """Attributes of ``path`` (None: it does not exist); cached for the TTL."""
        if key_of(path) == "":
            return Attr(True)
        hit, attr = self.cache.get(path)
        if hit:
            return attr
        try:
            attr = Attr.of_object(self._store.head(key_of(path)))
        except NoSuchKey:
            attr = Attr(True) if self._any_under(dir_prefix(path)) else None
        self.cache.put(path, attr)
        return attr

    def require(self, path: str) -> Attr:
        attr = self.lookup(path)
        if attr is None:
            raise PathError(errno.ENOENT, path)
        return attr

    def head(self, path: str) -> ObjectMeta:
        """Fresh HeadObject of a file (open() always sees the newest version)."""
        meta = self._store.head(key_of(path))
        self.cache.put(path, Attr.of_object(meta))
        return meta

    def listdir(self, path: str) -> Iterator[tuple[str, Attr]]:
        """Entries of a directory from delimited listings (caches the subdirectories)."""
        prefix = dir_prefix(path)
        seen: set[str] = set()
        for page in self._store.list_dir(prefix):
            entries = [(o.key[len(prefix):], Attr(False, o.size, o.mtime)) for o in page.objects]
            entries += [(p[len(prefix):].rstrip("/"), Attr(True)) for p in page.prefixes]
            for name, attr in entries:
                if not name or "/" in name or name in seen:
                    continue  # the directory's own marker, or keys no path can name
                seen.add(name)
                if attr.is_dir:  # listings carry no user metadata: files are looked up
                    self.cache.put(join(path, name), attr)
                yield name, attr

    def mkdir(self, path: str) -> None:
        if self.lookup(path) is not None:
            raise PathError(errno.EEXIST, path)
        self._store.put(dir_prefix(path), b"", {})
        self.cache.put(path, Attr(True))

    def rmdir(self, path: str) -> None:
        prefix = dir_prefix(path)
        if not prefix:
            raise PathError(errno.EBUSY, path)
        keys = [o.key for page in self._store.list_dir(prefix, delimiter="", max_keys=2)
                for o in page.objects]
        if any(k != prefix for k in keys):
            raise PathError(errno.ENOTEMPTY, path)
        if not keys:
            raise PathError(errno.ENOENT, path)
        self._store.delete(prefix)
        self.cache.invalidate(path)

    def unlink(self, path: str) -> None:
        if self.require(path).is_dir:
            raise PathError(errno.EISDIR, path)
        self._store.delete(key_of(path))
        self.cache.invalidate(path)

    def rename_file(self, old: str, new: str) -> str:
        """CopyObject + DeleteObject; returns the new object's ETag."""
        target = self.lookup(new)
        if target is not None and target.is_dir:
            raise PathError(errno.EISDIR, new)
        etag = self._store.copy(key_of(old), key_of(new))
        self._store.delete(key_of(old))
        self.cache.invalidate(old)
        self.cache.invalidate(new)
        return etag

    def rename_dir(self, old: str, new: str) -> int:
        """Copy every key under ``old/`` to ``new/``, then delete the originals.

        Not atomic: a crash in between leaves both trees (never neither). Returns the
        number of objects copied.
        """
        target = self.lookup(new)
        if target is not None and not target.is_dir:
            raise PathError(errno.ENOTDIR, new)
        src, dst = dir_prefix(old), dir_prefix(new)
        if dst.startswith(src):
            raise PathError(errno.EINVAL, new)
        if target is not None:
            self.rmdir(new)  # replacing an empty directory only (ENOTEMPTY otherwise)
        keys = [o.key for page in self._store.list_dir(src, delimiter="") for o in page.objects]
        for key in keys:
            self._store.copy(key, dst + key[len(src):])
        if src not in keys:
            self._store.put(dst, b"", {})  # keep the renamed directory visible when emptied
        for key in keys:
            self._store.delete(key)
        self.cache.invalidate_tree(old)
        self.cache.invalidate_tree(new)
        return len(keys)

    def update_metadata(self, path: str, values: dict[str, str]) -> None:
        """Store attributes of a closed file: a metadata-replacing copy onto itself."""
        meta = self._store.head(key_of(path))
        self._store.copy(meta.key, meta.key, metadata={**meta.metadata, **values})
        self.cache.invalidate(path)

    def _any_under(self, prefix: str) -> bool:
        for page in self._store.list_dir(prefix, delimiter="", max_keys=1):
            return bool(page.objects or page.prefixes)
        return False
