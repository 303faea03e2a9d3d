"""Parts of a multipart upload written in place into one file that becomes the object.

A client uploads all parts of an object but the last at one size (its part size). Part N
of S bytes is therefore written at ``(N - 1) * stride`` of the upload's ``assembly`` file,
the stride being the size of the upload's first placed part (one of at least the minimum
part size: a smaller one can only be the last); at completion, when every chosen part lies
where the object needs it, the assembly file itself is renamed into place
(through a hard link, so a completion that fails leaves the upload as it was): no byte is
copied. A part that does not fit (larger than the stride, beyond ``MAX_PLACED_END``, of a
number that already has a record or a write in flight, of a length the request did not
declare, arriving while a completion runs or once the file is an object's) is a data file
of its own; a completion copies such parts into the assembly file, or, when placed parts
are not where the object needs them, concatenates all parts into a new file as before.

Files in the upload's directory besides the records:

* ``assembly``: the placed parts' bytes;
* ``stride``: the stride in bytes, written once (temp file + link) and durable before use;
* ``slot-NNNNN``: a write of part N into the assembly file is running (removed when its
  record is written, or when it fails);
* ``sealed``: a completion is taking the assembly file: no new part is placed in it.

A placed part writer creates its slot, then looks for ``sealed``; a completion creates
``sealed`` and links the assembly, then looks for slots: either the writer backs off or the
completion sees the slot and copies instead. The assembly file is written only while it has
one link: after a crash between the commit of the object and the removal of the upload, the
object's bytes are never touched again (``sealed`` stays too).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from backends.core.base import PartInfo
from backends.core.errors import IncompleteBody
from backends.core.regions import FileRegion
from backends.direct_io import DirectWriter
from backends.files import FILE_MODE, O_CREATE, O_READ, fsync_dir, read_small, temp_name
from backends.posix.staging import StagedFile

ASSEMBLY = "assembly"
STRIDE = "stride"
SEALED = "sealed"
SLOT_PREFIX = "slot-"
#: placed parts end below this offset: S3's largest object, within every file system's limit
MAX_PLACED_END = 5 * 1024 ** 4
_O_RDWR = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC
#: link(2) refusals of a file system without hard links (some network and FAT-like ones):
#: no part is placed there, and completion copies
_NO_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS,
             errno.EXDEV}


@dataclass(frozen=True, slots=True)
class StoredPart:
    """A part's record: its info and where its bytes are (``at`` in the file ``data``)."""

    info: PartInfo
    data: str
    at: int = 0

    @property
    def placed(self) -> bool:
        return self.data == ASSEMBLY


class PlacedPart(StagedFile):
    """A part's bytes written at ``offset`` of the upload's assembly file; at most
    ``length`` of them. Never removed by :meth:`discard` (the file holds other parts)."""

    def __init__(self, path: Path, offset: int, length: int, *, chunk_size: int,
                 durable: bool, direct: bool = False) -> None:
        super().__init__(path.parent, chunk_size=chunk_size, durable=durable, direct=direct)
        self.path = path
        self.offset = offset
        self.committed = True
        self._length = length

    def _open(self) -> None:
        self.fd = os.open(self.path, _O_RDWR | os.O_CREAT, FILE_MODE)

    def _write(self, pieces: list[bytes]) -> None:
        self._check_room(sum(len(piece) for piece in pieces))
        super()._write(pieces)

    def _copy_regions(self, regions: list[FileRegion]) -> None:
        self._check_room(sum(region.count for region in regions))
        super()._copy_regions(regions)

    def _check_room(self, count: int) -> None:
        if self.size + count > self._length:
            raise IncompleteBody("a part's body is longer than its request declared")


def _slot(directory: Path, part_number: int) -> Path:
    return directory / f"{SLOT_PREFIX}{part_number:05d}"


def _stride(directory: Path, size: int, min_stride: int, *, durable: bool) -> int | None:
    """The upload's stride, made ``size`` if it has none yet and ``size`` is at least
    ``min_stride`` (durable before it is used); None when it has none (or an unreadable
    one: a crash of an unsynced upload)."""
    path = directory / STRIDE
    with contextlib.suppress(FileNotFoundError):
        return _read_stride(path)
    if size < min_stride:
        return None
    tmp = directory / temp_name("stride")
    fd = os.open(tmp, O_CREATE, FILE_MODE)
    try:
        os.write(fd, str(size).encode())
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return _read_stride(path)
    except OSError as exc:
        if exc.errno in _NO_LINKS:
            return None
        raise
    finally:
        os.unlink(tmp)
    if durable:
        fsync_dir(directory)
    return size


def _read_stride(path: Path) -> int | None:
    try:
        stride = int(read_small(path))
    except ValueError:
        return None
    return stride if stride > 0 else None


def claim(directory: Path, part_number: int, size: int, min_stride: int, *,
          durable: bool) -> int | None:
    """Blocking: the offset part ``part_number`` of ``size`` bytes is to be written at in
    the assembly file, its slot taken; None when it is to be a file of its own. The caller
    has checked the part number has no record yet."""
    if size <= 0:
        return None
    stride = _stride(directory, size, max(min_stride, 1), durable=durable)
    if stride is None:
        return None
    offset = (part_number - 1) * stride
    if size > stride or offset + size > MAX_PLACED_END:
        return None
    slot = _slot(directory, part_number)
    try:
        os.close(os.open(slot, O_CREATE, FILE_MODE))
    except FileExistsError:
        return None
    if (directory / SEALED).exists() or _links(directory / ASSEMBLY) > 1:
        release(directory, part_number)
        return None
    return offset


def _links(path: Path) -> int:
    try:
        return os.stat(path, follow_symlinks=False).st_nlink
    except FileNotFoundError:
        return 0


def release(directory: Path, part_number: int) -> None:
    """Blocking: end the write of part ``part_number`` into the assembly file."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_slot(directory, part_number))


def unseal(directory: Path) -> None:
    """Blocking: after a completion that did not commit, parts may be placed again."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(directory / SEALED)


def _writes_running(directory: Path) -> bool:
    with os.scandir(directory) as entries:
        return any(e.name.startswith(SLOT_PREFIX) for e in entries)


def in_place(chosen: Sequence[StoredPart], stored: Iterable[StoredPart]) -> bool:
    """Whether the assembly file can become the object made of ``chosen``: at least one
    part placed, every placed part chosen and at its offset in the object."""
    numbers = {p.info.part_number for p in chosen}
    if any(p.placed and p.info.part_number not in numbers for p in stored):
        return False
    offset, placed = 0, False
    for part in chosen:
        if part.placed:
            if part.at != offset:
                return False
            placed = True
        offset += part.info.size
    return placed


def take(directory: Path, chosen: Sequence[StoredPart], link: Path, *, durable: bool,
         direct: bool) -> int | None:
    """Blocking, under the upload's lock: make the assembly file the object of ``chosen``
    (:func:`in_place` holds) under the new name ``link``; the parts of their own files are
    copied in (past the page cache with ``direct``). Returns the file's open descriptor,
    or None (nothing made) when it cannot be taken: a placed write is running, the file is
    already an object's, or the file system has no hard links. Once it returned a
    descriptor, the caller calls :func:`unseal` unless the object is committed."""
    fd = os.open(directory / ASSEMBLY, _O_RDWR)
    try:
        if os.fstat(fd).st_nlink != 1:
            os.close(fd)
            return None
        os.close(os.open(directory / SEALED, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC,
                         FILE_MODE))
        try:
            os.link(directory / ASSEMBLY, link)
        except OSError as exc:
            if exc.errno not in _NO_LINKS:
                raise
            _give_back(directory, fd, link)
            return None
        if _writes_running(directory):
            _give_back(directory, fd, link)
            return None
        offset = 0
        writer = DirectWriter(directory / ASSEMBLY, fd, enabled=direct)
        try:
            for part in chosen:
                if not part.placed:
                    src = os.open(directory / part.data, O_READ)
                    try:
                        writer.copy(src, part.info.size, src_offset=0, offset=offset)
                    finally:
                        os.close(src)
                offset += part.info.size
        finally:
            writer.close()
        if os.fstat(fd).st_size != offset:
            os.ftruncate(fd, offset)
        if durable:
            os.fsync(fd)
        return fd
    except BaseException:
        _give_back(directory, fd, link)
        raise


def _give_back(directory: Path, fd: int, link: Path) -> None:
    """Close ``fd``, remove ``link`` if it was made, and let parts be placed again."""
    os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(link)
    unseal(directory)
