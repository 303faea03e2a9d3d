"""The open files of a mount: how a file is made for an open (a plain :class:`OpenFile`
or a :class:`SharedFile`), how a handle joins the one open under its path, which file a
handle or a path is, and how the last handle lets a file go."""

from __future__ import annotations

import errno
import logging
import uuid
from concurrent.futures import ThreadPoolExecutor

from gateway.fuse_mount.attrs import metadata_for
from gateway.fuse_mount.errors import describe
from gateway.fuse_mount.handles import Handle, OpenFiles, ReadStream
from gateway.fuse_mount.namespace import Namespace, PathError, key_of
from gateway.fuse_mount.openfile import OpenFile, WriteConfig
from gateway.fuse_mount.reader import ReadAhead
from gateway.fuse_mount.settings import MountSettings, named_by
from gateway.fuse_mount.shared import SharedFile
from gateway.fuse_mount.shared_upload import LeaseRenewer
from gateway.fuse_mount.store import BucketClient
from gateway.fuse_mount.stream import StreamReads

log = logging.getLogger(__name__)


class FileOpener:
    """Opens files for the FUSE operations and lets them go; owns the worker threads
    of uploads and read-ahead (stopped by :meth:`shutdown`)."""

    def __init__(self, store: BucketClient, settings: MountSettings, ns: Namespace) -> None:
        self._store = store
        self._settings = settings
        self._ns = ns
        self.files = OpenFiles()
        self._write_cfg = WriteConfig(settings.block_size, settings.max_inflight,
                                      settings.staging_dir,
                                      kernel_times=settings.writeback_cache)
        self._uploads = ThreadPoolExecutor(settings.threads, thread_name_prefix="upload")
        self._fetches = ThreadPoolExecutor(settings.threads, thread_name_prefix="fetch")
        self._writer = uuid.uuid4().hex  # this mount, as a writer of shared files
        self._leases = LeaseRenewer()
        #: keys of files whose last handle went without their bytes being stored
        self.unsaved: list[str] = []

    def shared(self, path: str) -> bool:
        """Whether ``path`` is named by ``--shared-files``."""
        return named_by(key_of(path), self._settings.shared_files)

    def direct(self, path: str) -> bool:
        """Whether ``path`` is named by ``--direct-io`` (no page cache for its handles)."""
        return named_by(key_of(path), self._settings.direct_files)

    def new_file(self, path: str, *, truncate: bool,
                 metadata: dict[str, str] | None = None, writable: bool = False) -> OpenFile:
        """A file for ``path``: empty if ``truncate`` (keeping the mode and owner of the
        object it replaces, as a local file system does), else the object's newest version;
        a :class:`SharedFile` when written and named by ``--shared-files``."""
        if writable and self.shared(path):
            return SharedFile(self._store, key_of(path), config=self._write_cfg,
                              pool=self._uploads, writer=self._writer, renewer=self._leases,
                              lease=self._settings.shared_lease, metadata=metadata)
        existing = None if truncate else self._ns.head(path)
        if truncate and metadata is None and (attr := self._ns.lookup(path)) is not None:
            metadata = metadata_for(mode=attr.mode, uid=attr.uid, gid=attr.gid)
        return OpenFile(self._store, key_of(path), config=self._write_cfg, pool=self._uploads,
                        existing=existing, truncate=truncate, metadata=metadata)

    def attach(self, path: str, candidate: OpenFile | None, *, writable: bool,
               truncate: bool) -> tuple[int, OpenFile]:
        """A new handle on ``path`` (joining the file open there, see OpenFiles.attach)."""
        stream: ReadStream
        if self._store.streams and self._settings.readahead > 0:
            stream = StreamReads(self._store)
        else:
            stream = ReadAhead(self._store, block_size=self._settings.block_size,
                               window=self._settings.readahead_blocks, pool=self._fetches)
        while (opened := self.files.attach(key_of(path), candidate, writable=writable,
                                           stream=stream)) is None:
            candidate = self.new_file(path, truncate=truncate, writable=writable)  # closed meanwhile
        fh, f = opened
        if truncate and f is not candidate:
            try:
                f.truncate(0)
            except BaseException:
                self.release(fh)
                raise
        return fh, f

    def start_shared(self, fh: int, f: SharedFile) -> None:
        """Join the upload of shared file ``f`` (the handle ``fh`` goes if that fails)."""
        try:
            f.start()
        except BaseException:
            self.release(fh)
            raise

    def release(self, fh: int) -> None:
        """Handle ``fh`` is closed: its file goes with its last handle."""
        handle, last = self.files.release(fh)
        if handle is None:
            return
        if handle.stream is not None:
            handle.stream.close()
        if last:
            self.release_file(handle.file)  # normally nothing left: flush committed
            self.files.forget(handle.file)

    def release_file(self, f: OpenFile) -> None:
        """The last handle of ``f`` is gone: store what is left, or say loudly that we could
        not (the exit code of the mount reports it too)."""
        try:
            f.release()
        except Exception as exc:  # noqa: BLE001 - logged and reported by the exit code
            if not f.failed:  # (a failed file has said so once)
                log.error("could not store %s: %s; its previous version stays", f.key,
                          describe(exc))
            self.unsaved.append(f.key)

    def replace_open(self, new: str, keep: OpenFile | None) -> None:
        """A rename is about to overwrite ``new``: a file open there keeps a local copy."""
        replaced = self.files.get(key_of(new))
        if replaced is not None and replaced is not keep:
            replaced.detach()
            self.files.detach(key_of(new))

    def handle(self, fh: int) -> Handle:
        handle = self.files.handle(fh)
        if handle is None:
            raise PathError(errno.EBADF, str(fh))
        return handle

    def open_file(self, path: str | None, fh: int | None = None) -> OpenFile | None:
        """The open file of handle ``fh`` if given, else the one open under ``path``."""
        if fh:
            handle = self.files.handle(fh)
            if handle is not None:
                return handle.file
        return self.files.get(key_of(path)) if path is not None else None

    def shutdown(self) -> None:
        """Unmount: store every file still open, then stop the worker threads."""
        for f in self.files.drain():
            self.release_file(f)
        self._uploads.shutdown(wait=True, cancel_futures=True)
        self._fetches.shutdown(wait=False, cancel_futures=True)
