"""Open files and file handles of the mount: one shared :class:`OpenFile` per open path.

Every handle (fh) of a path open in this mount refers to the same :class:`OpenFile`, so
handles see each other's writes like on a local file system, whatever process or thread
opened them. The registry counts the handles of each file; the file leaves the registry
with its last handle. ``_lock`` guards only the tables and never covers I/O or a file's
own lock: it never waits for a file.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from gateway.fuse_mount.openfile import OpenFile
from gateway.fuse_mount.reader import ReadAhead
from gateway.fuse_mount.store import RemoteObject
from gateway.fuse_mount.stream import StreamReads

#: a handle's reads: streamed, or block read-ahead (mounts without the light request path)
ReadStream = ReadAhead | StreamReads


@dataclass(slots=True, eq=False)
class Handle:
    """One FUSE file handle: its file, its access mode and its own sequential read stream."""

    file: OpenFile
    writable: bool
    stream: ReadStream | None = None
    #: flush (close) was called on this handle: its owner is done writing through it.
    closing: bool = False
    #: the kernel may keep the pages it cached of this file (answer to open)
    keep_cache: bool = False
    #: the kernel's page cache is bypassed (a shared file: writes keep their exact bytes)
    direct_io: bool = False


@dataclass(slots=True, eq=False)
class _Entry:
    file: OpenFile
    handles: set[int] = field(default_factory=set)


class OpenFiles:
    """The table of open files (by key) and handles (by fh); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[str, _Entry] = {}
        self._by_file: dict[int, _Entry] = {}  # id(OpenFile) -> entry, also once detached
        self._handles: dict[int, Handle] = {}
        self._dirs: dict[int, str] = {}  # directory handles -> path
        # Files whose last handle is gone while their release (final commit) runs: still
        # found by name, so that a rename or unlink waits for it (the file's lock).
        self._releasing: dict[str, OpenFile] = {}
        self._next_fh = 1

    def get(self, key: str) -> OpenFile | None:
        """The file open (or being released) under ``key`` in this mount, if any."""
        with self._lock:
            entry = self._files.get(key)
            return entry.file if entry is not None else self._releasing.get(key)

    def attach(self, key: str, candidate: OpenFile | None, *, writable: bool,
               stream: ReadStream | None = None) -> tuple[int, OpenFile] | None:
        """Open a handle on ``key``: it joins the file already open there, unless that file
        is an unmodified copy of another version than ``candidate`` (the object was replaced
        by another client): then ``candidate`` takes the name and the older file stays with
        its own handles. Returns the new fh and its file; None when nothing is open under
        ``key`` and there is no ``candidate`` (the caller builds one and tries again)."""
        with self._lock:
            entry = self._files.get(key)
            if entry is None or (candidate is not None and _superseded(entry.file, candidate)):
                if candidate is None:
                    return None
                entry = _Entry(candidate)
                self._files[key] = entry
                self._by_file[id(candidate)] = entry
            fh = self._take_fh()
            self._handles[fh] = Handle(entry.file, writable, stream)
            entry.handles.add(fh)
            return fh, entry.file

    def open_dir(self, path: str) -> int:
        """A handle on directory ``path`` (libfuse passes no path to readdir)."""
        with self._lock:
            fh = self._take_fh()
            self._dirs[fh] = path
            return fh

    def dir_path(self, fh: int) -> str | None:
        with self._lock:
            return self._dirs.get(fh)

    def release_dir(self, fh: int) -> None:
        with self._lock:
            self._dirs.pop(fh, None)

    def handle(self, fh: int) -> Handle | None:
        with self._lock:
            return self._handles.get(fh)

    def last_close(self, fh: int) -> bool:
        """Mark ``fh`` as closing; True when no writable handle of its file is still open and
        not closing (then this close is the one that must upload)."""
        with self._lock:
            handle = self._handles.get(fh)
            if handle is None:
                return False
            handle.closing = True
            return self._idle(handle.file)

    def writing(self, fh: int) -> None:
        """``fh`` is written through after a flush (a ``dup``'d descriptor was closed):
        its owner is not done with it."""
        with self._lock:
            handle = self._handles.get(fh)
            if handle is not None:
                handle.closing = False

    def idle(self, f: OpenFile) -> bool:
        """No writable handle of ``f`` is open and not closing: nobody will commit it."""
        with self._lock:
            return self._idle(f)

    def _idle(self, f: OpenFile) -> bool:
        entry = self._by_file.get(id(f))
        return entry is None or all(
            self._handles[fh].closing or not self._handles[fh].writable for fh in entry.handles)

    def release(self, fh: int) -> tuple[Handle | None, bool]:
        """Forget ``fh``; returns it and whether it was the last handle of its file (then
        the caller releases the file and calls :meth:`forget`)."""
        with self._lock:
            handle = self._handles.pop(fh, None)
            if handle is None:
                return None, False
            entry = self._by_file.get(id(handle.file))
            if entry is None:
                return handle, True
            entry.handles.discard(fh)
            if entry.handles:
                return handle, False
            del self._by_file[id(handle.file)]
            if self._files.get(handle.file.key) is entry:
                del self._files[handle.file.key]
                self._releasing[handle.file.key] = handle.file
            return handle, True

    def forget(self, f: OpenFile) -> None:
        """``f`` is released: its name no longer leads to it."""
        with self._lock:
            for key in [k for k, v in self._releasing.items() if v is f]:
                del self._releasing[key]

    def detach(self, key: str) -> OpenFile | None:
        """Remove the name ``key`` (unlink, or replaced by a rename): its handles keep
        working on the file, which is returned."""
        with self._lock:
            entry = self._files.pop(key, None)
            return entry.file if entry is not None else self._releasing.pop(key, None)

    def rename(self, f: OpenFile, new_key: str) -> None:
        """``f`` (open under its old key) is now named ``new_key``."""
        with self._lock:
            entry = self._by_file.get(id(f))
            if entry is None:
                return
            if self._files.get(f.key) is entry:
                del self._files[f.key]
            self._files[new_key] = entry

    def keys_under(self, prefix: str) -> list[str]:
        """Keys of open files whose name starts with ``prefix``."""
        with self._lock:
            return [k for k in self._files if k.startswith(prefix)]

    def drain(self) -> list[OpenFile]:
        """Forget every handle and return every open file (unmount)."""
        with self._lock:
            files = [entry.file for entry in self._by_file.values()]
            self._files.clear()
            self._by_file.clear()
            self._handles.clear()
            self._dirs.clear()
            self._releasing.clear()
            return files

    def _take_fh(self) -> int:
        fh = self._next_fh
        self._next_fh += 1
        return fh


def _superseded(current: OpenFile, candidate: OpenFile) -> bool:
    """``current`` is unmodified here and pinned to another version than ``candidate``."""
    pinned, fresh = current.version, candidate.version
    return (pinned is not None and fresh is not None and not current.dirty
            and _version(pinned) != _version(fresh))


def _version(meta: RemoteObject) -> tuple[str, int]:
    return meta.etag, meta.size
