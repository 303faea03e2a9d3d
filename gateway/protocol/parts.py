"""GET/HEAD ``?partNumber=N``: which bytes of an object are its part N, as S3 reads them.

A multipart object's part sizes are recorded at completion (``backends.multipart``); an
object with a single-part ETag is one part, so ``partNumber=1`` reads all of it.
"""

from __future__ import annotations

from backends.core.base import ByteRange, ObjectInfo
from backends.core.errors import InvalidPart, NotImplementedByBackend
from backends.multipart import part_sizes, parts_count


def part_range(info: ObjectInfo, part_number: int) -> ByteRange | None:
    """The bytes of part ``part_number`` of ``info`` (None: an empty object, no range).

    InvalidPart past the last part; NotImplementedByBackend for a multipart object whose
    part sizes were not recorded (completed by an upstream S3 service).
    """
    count = parts_count(info.etag)
    if count is None:
        if part_number != 1:
            raise InvalidPart(f"The object has one part; part {part_number} does not exist.")
        return ByteRange(0, info.size - 1) if info.size else None
    if part_number > count:
        raise InvalidPart(f"The object has {count} parts; part {part_number} does not exist.")
    sizes = part_sizes(info)
    if sizes is None:
        raise NotImplementedByBackend("The part sizes of this multipart object were not "
                                      "recorded (it was completed by the upstream store); "
                                      "use a Range request.")
    start = sum(sizes[:part_number - 1])
    size = sizes[part_number - 1]
    return ByteRange(start, start + size - 1) if size else None
