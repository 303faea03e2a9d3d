"""Paths of the mount as S3 keys: lookups, listings, directories, renames, deletions.

A file ``/a/b`` is the object ``a/b``; a directory ``/a`` exists when an object ``a/``
(its marker, written by mkdir) or any key under ``a/`` exists. Nothing here knows about
open files: :mod:`gateway.fuse_mount.operations` handles those first. Attributes are
cached for the TTL (:class:`AttrCache`), and so are complete listings of directories
made here (:class:`Listings`), which answer lookups of missing names without a request.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from dataclasses import replace

from backends.core.errors import NoSuchKey
from gateway.fuse_mount.attrs import Attr, AttrCache, metadata_for
from gateway.fuse_mount.listings import Listings
from gateway.fuse_mount.store import BucketClient, RemoteListing, RemoteObject


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


def split(path: str) -> tuple[str, str]:
    """``/a/b/c`` -> (``/a/b``, ``c``); ``/c`` -> (``/``, ``c``)."""
    parent, _, name = path.rstrip("/").rpartition("/")
    return parent or "/", name


class Namespace:
    """Namespace operations on one bucket, with an attribute cache in front of lookups."""

    def __init__(self, store: BucketClient, cache: AttrCache, listings: Listings) -> None:
        self._store = store
        self.cache = cache
        self.listings = listings

    def lookup(self, path: str) -> Attr | None:
        """Attributes of ``path`` (None: it does not exist); cached for the TTL."""
        if key_of(path) == "":
            return Attr(True)
        hit, attr = self.cache.get(path)
        if hit:
            return attr
        parent, name = split(path)
        names = self.listings.names(parent, self._list_all, name=name)
        if names is not None and names.get(name) is not False:  # missing, or a directory
            attr = Attr(True) if names.get(name) else None
        elif names is None and self.listings.names(path):
            attr = Attr(True)  # a directory made here, not empty when listed within the TTL
        else:
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

    def head(self, path: str) -> RemoteObject:
        """Fresh HeadObject of a file (open() always sees the newest version)."""
        meta = self._store.head(key_of(path))
        self.cache.put(path, Attr.of_object(meta))
        return meta

    def listdir(self, path: str) -> Iterator[tuple[str, Attr]]:
        """Entries of a directory from delimited listings. The attributes of every entry
        are cached (``ls -l`` costs the listing only, no HeadObject per file), and so is the
        complete listing once every page was read."""
        prefix = dir_prefix(path)
        names: dict[str, bool] = {}
        pending = self.listings.begin(path)
        try:
            for page in self._store.list_dir(prefix):
                for name, attr in _entries(page, prefix):
                    if name in names:
                        continue
                    names[name] = attr.is_dir
                    self.cache.fill(join(path, name), attr)
                    yield name, attr
        except BaseException:
            self.listings.abort(pending)
            raise
        self.listings.finish(pending, names)

    def created(self, path: str, *, is_dir: bool = False) -> None:
        """This mount created ``path`` (a file being written, or a directory)."""
        self.cache.invalidate(path)
        self.listings.added(*split(path), is_dir=is_dir)

    def removed(self, path: str) -> None:
        """This mount removed ``path``."""
        self.cache.invalidate(path)
        self.listings.removed(*split(path))

    def mkdir(self, path: str) -> None:
        if self.lookup(path) is not None:
            raise PathError(errno.EEXIST, path)
        self._store.put(dir_prefix(path), b"", {})
        self.cache.put(path, Attr(True))
        self.listings.added(*split(path), is_dir=True)
        self.listings.made(path)

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
        self.removed(path)
        self.listings.forget_tree(path)

    def unlink(self, path: str) -> None:
        if self.require(path).is_dir:
            raise PathError(errno.EISDIR, path)
        self.delete(path)

    def delete(self, path: str) -> None:
        """DeleteObject of the file ``path`` (nothing happens if it does not exist)."""
        self._store.delete(key_of(path))
        self.removed(path)

    def rename_file(self, old: str, new: str) -> str:
        """CopyObject + DeleteObject; returns the new object's ETag."""
        target = self.lookup(new)
        if target is not None and target.is_dir:
            raise PathError(errno.EISDIR, new)
        etag = self._store.copy(key_of(old), key_of(new))
        self._store.delete(key_of(old))
        self.removed(old)
        self.created(new)
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
        self.listings.forget_tree(old)
        self.listings.forget_tree(new)
        self.removed(old)
        self.created(new, is_dir=True)
        return len(keys)

    def update_metadata(self, path: str, values: dict[str, str]) -> None:
        """Store attributes of a closed file: a metadata-replacing copy onto itself (no
        data moves through the client). The copy's LastModified is now: an object that
        had no ``mtime`` keeps its time as one."""
        meta = self._store.head(key_of(path))
        kept = metadata_for(mtime_ns=Attr.of_object(meta).mtime_ns)
        metadata = {**kept, **meta.metadata, **values}
        self._store.copy(meta.key, meta.key, metadata=metadata)
        self.cache.put(path, Attr.of_object(replace(meta, metadata=metadata)))

    def _list_all(self, path: str, max_entries: int) -> dict[str, bool] | None:
        """The complete entries of a directory (every listing page), or None when it has
        more than ``max_entries``."""
        prefix = dir_prefix(path)
        names: dict[str, bool] = {}
        for page in self._store.list_dir(prefix):
            for name, listed in _listed(page, prefix):
                names.setdefault(name, listed is None)
            if len(names) > max_entries:
                return None
        return names

    def _any_under(self, prefix: str) -> bool:
        for page in self._store.list_dir(prefix, delimiter="", max_keys=1):
            return bool(page.objects or page.prefixes)
        return False


def _entries(page: RemoteListing, prefix: str) -> Iterator[tuple[str, Attr]]:
    """The (name, attributes) of one listing page of the directory ``prefix``; a file
    comes before a directory of the same name, which it hides."""
    for name, listed in _listed(page, prefix):
        yield name, Attr(True) if listed is None else Attr.of_listed(listed)


def _listed(page: RemoteListing, prefix: str) -> Iterator[tuple[str, RemoteObject | None]]:
    """The (name, object) of one listing page of the directory ``prefix``, object None for
    a directory; files first."""
    start = len(prefix)
    for o in page.objects:
        name = o.key[start:]
        if name and "/" not in name:  # not the directory's own marker
            yield name, o
    for p in page.prefixes:
        name = p[start:].rstrip("/")
        if name and "/" not in name:
            yield name, None
