"""Parts written in place into the upload's assembly file, which completion makes the object."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import pytest

from backends.core.base import CompletedPart, ObjectMeta
from backends.core.errors import IncompleteBody, NoSuchUpload, PreconditionFailed
from backends.posix import PosixBackend
from backends.posix.assembly import ASSEMBLY, SEALED, STRIDE
from tests.backends.conformance import body_of
from tests.backends.posix.support import MIN_PART, Declared, get

PART = MIN_PART


def data_of(n: int, size: int = PART) -> bytes:
    return bytes([n % 251]) * size


def upload_dir(store: PosixBackend, upload_id: str) -> Path:
    return store._hidden.uploads / "bkt" / upload_id


def object_path(store: PosixBackend, key: str) -> Path:
    return store._hidden.root / "bkt" / key


def part_files(store: PosixBackend, upload_id: str) -> list[str]:
    return sorted(n for n in os.listdir(upload_dir(store, upload_id))
                  if n.startswith("part-") and not n.endswith(".json"))


async def send(store: PosixBackend, upload_id: str, number: int, data: bytes,
               key: str = "obj") -> CompletedPart:
    info = await store.upload_part("bkt", key, upload_id, number, Declared(data))
    return CompletedPart(number, info.etag)


async def complete(store: PosixBackend, upload_id: str, parts: list[CompletedPart],
                   key: str = "obj", **conditions: str) -> None:
    await store.complete_multipart_upload("bkt", key, upload_id, parts,
                                          if_match=conditions.get("if_match"),
                                          if_none_match=conditions.get("if_none_match"))


async def new_upload(store: PosixBackend, key: str = "obj") -> str:
    return (await store.create_multipart_upload("bkt", key, meta=ObjectMeta())).upload_id


async def test_parts_sent_in_any_order_become_the_object_without_a_copy(
        posix: PosixBackend) -> None:
    upload_id = await new_upload(posix)
    sizes = {1: PART, 2: PART, 3: PART, 4: PART // 3}
    parts = await asyncio.gather(*(send(posix, upload_id, n, data_of(n, sizes[n]))
                                   for n in (3, 1, 4, 2)))
    # every part was written in place (the last too, unless it came before all others)
    assert [n for n in part_files(posix, upload_id) if not n.startswith("part-00004")] == []
    assembly_ino = (upload_dir(posix, upload_id) / ASSEMBLY).stat().st_ino
    await complete(posix, upload_id, sorted(parts, key=lambda p: p.part_number))
    assert await get(posix, "obj") == b"".join(data_of(n, sizes[n]) for n in (1, 2, 3, 4))
    # the assembly file itself became the object, with no other name left
    st = object_path(posix, "obj").stat()
    assert (st.st_ino, st.st_nlink) == (assembly_ino, 1)
    assert not upload_dir(posix, upload_id).exists()


async def test_a_replaced_part_goes_to_a_file_of_its_own_and_into_its_place_at_completion(
        posix: PosixBackend) -> None:
    upload_id = await new_upload(posix)
    first = [await send(posix, upload_id, n, data_of(n)) for n in (1, 2, 3)]
    again = await send(posix, upload_id, 2, data_of(99))
    assert len(part_files(posix, upload_id)) == 1
    assert [p.part_number for p in await posix.list_parts("bkt", "obj", upload_id)] == [1, 2, 3]
    await complete(posix, upload_id, [first[0], again, first[2]])
    assert await get(posix, "obj") == data_of(1) + data_of(99) + data_of(3)


@pytest.mark.parametrize("numbers, chosen", [
    ((1, 3, 4), (1, 3, 4)),  # a gap in the part numbers: placed parts are not where needed
    ((1, 2, 3), (1, 2)),  # a placed part left out
])
async def test_parts_not_where_the_object_needs_them_are_copied(
        posix: PosixBackend, numbers: tuple[int, ...], chosen: tuple[int, ...]) -> None:
    upload_id = await new_upload(posix)
    parts = {n: await send(posix, upload_id, n, data_of(n)) for n in numbers}
    await complete(posix, upload_id, [parts[n] for n in chosen])
    assert await get(posix, "obj") == b"".join(data_of(n) for n in chosen)
    assert object_path(posix, "obj").stat().st_nlink == 1
    assert not upload_dir(posix, upload_id).exists()


async def test_a_part_larger_than_the_first_is_a_file_of_its_own(posix: PosixBackend) -> None:
    upload_id = await new_upload(posix)
    parts = [await send(posix, upload_id, 1, data_of(1)),
             await send(posix, upload_id, 2, data_of(2, 2 * PART)),
             await send(posix, upload_id, 3, data_of(3, 100))]
    assert len(part_files(posix, upload_id)) == 1
    assert (upload_dir(posix, upload_id) / STRIDE).read_text() == str(PART)
    await complete(posix, upload_id, parts)
    assert await get(posix, "obj") == data_of(1) + data_of(2, 2 * PART) + data_of(3, 100)


async def test_a_body_without_a_declared_length_is_a_file_of_its_own(
        posix: PosixBackend) -> None:
    upload_id = await new_upload(posix)
    info = await posix.upload_part("bkt", "obj", upload_id, 1, body_of(data_of(1)))
    assert len(part_files(posix, upload_id)) == 1
    await complete(posix, upload_id, [CompletedPart(1, info.etag)])
    assert await get(posix, "obj") == data_of(1)


async def test_a_body_longer_than_declared_is_refused_and_harms_no_neighbour(
        posix: PosixBackend) -> None:
    upload_id = await new_upload(posix)
    parts = [await send(posix, upload_id, n, data_of(n)) for n in (1, 3)]
    with pytest.raises(IncompleteBody, match="longer than its request declared"):
        await posix.upload_part("bkt", "obj", upload_id, 2,
                                Declared(data_of(2, PART + 10), declared=PART))
    assert not any(n.startswith("slot-") for n in os.listdir(upload_dir(posix, upload_id)))
    parts.insert(1, await send(posix, upload_id, 2, data_of(2)))
    await complete(posix, upload_id, parts)
    assert await get(posix, "obj") == data_of(1) + data_of(2) + data_of(3)


async def test_a_completion_that_fails_leaves_the_upload_whole(posix: PosixBackend) -> None:
    await posix.put_object("bkt", "obj", body_of(b"already here"), meta=ObjectMeta())
    upload_id = await new_upload(posix)
    parts = [await send(posix, upload_id, n, data_of(n)) for n in (1, 2)]
    with pytest.raises(PreconditionFailed):
        await complete(posix, upload_id, parts, if_none_match="*")
    directory = upload_dir(posix, upload_id)
    assert (directory / ASSEMBLY).stat().st_nlink == 1
    assert not (directory / SEALED).exists()
    parts.append(await send(posix, upload_id, 3, data_of(3)))  # placed again
    assert part_files(posix, upload_id) == []
    await complete(posix, upload_id, parts)
    assert await get(posix, "obj") == data_of(1) + data_of(2) + data_of(3)


async def test_a_completion_during_a_placed_write_copies_and_the_write_cannot_touch_the_object(
        posix: PosixBackend) -> None:
    upload_id = await new_upload(posix)
    parts = [await send(posix, upload_id, n, data_of(n)) for n in (1, 2)]
    held = asyncio.Event()
    body = Declared(data_of(3), held=held)
    late = asyncio.ensure_future(posix.upload_part("bkt", "obj", upload_id, 3, body))
    await body.started.wait()
    await complete(posix, upload_id, parts)  # part 3 is being written in place meanwhile
    assert object_path(posix, "obj").stat().st_nlink == 1
    held.set()
    with pytest.raises(NoSuchUpload):
        await late
    assert await get(posix, "obj") == data_of(1) + data_of(2)


async def test_an_assembly_file_that_is_already_an_object_is_never_written_again(
        posix: PosixBackend, tmp_path: Path) -> None:
    # The state a crash leaves between the commit of the object (a second name of the
    # assembly file) and the removal of the upload, made here by a hard link.
    upload_id = await new_upload(posix)
    parts = [await send(posix, upload_id, n, data_of(n)) for n in (1, 2)]
    committed = tmp_path / "committed-object"
    os.link(upload_dir(posix, upload_id) / ASSEMBLY, committed)
    parts.append(await send(posix, upload_id, 3, data_of(3)))
    assert len(part_files(posix, upload_id)) == 1  # not written into the shared file
    await complete(posix, upload_id, parts)
    assert await get(posix, "obj") == data_of(1) + data_of(2) + data_of(3)
    assert committed.read_bytes() == data_of(1) + data_of(2)


async def test_placed_parts_outlive_a_restart(posix: PosixBackend, tmp_path: Path) -> None:
    upload_id = await new_upload(posix)
    parts = [await send(posix, upload_id, n, data_of(n)) for n in (1, 2)]
    again = PosixBackend(tmp_path / "root", min_part_size=MIN_PART, chunk_size=64 * 1024)
    try:
        parts.append(await send(again, upload_id, 3, data_of(3, 7)))
        assert part_files(again, upload_id) == []
        await complete(again, upload_id, parts)
        assert await get(again, "obj") == data_of(1) + data_of(2) + data_of(3, 7)
    finally:
        await again.aclose()


async def test_an_aborted_upload_leaves_nothing(posix: PosixBackend) -> None:
    upload_id = await new_upload(posix)
    await send(posix, upload_id, 1, data_of(1))
    await posix.abort_multipart_upload("bkt", "obj", upload_id)
    assert not upload_dir(posix, upload_id).exists()
    assert not any(posix._hidden.tmp.iterdir())


async def test_an_unreadable_stride_places_no_part(posix: PosixBackend) -> None:
    # What a crash of an upload without fsync can leave: the stride's name, not its bytes.
    upload_id = await new_upload(posix)
    (upload_dir(posix, upload_id) / STRIDE).write_bytes(b"")
    parts = [await send(posix, upload_id, n, data_of(n)) for n in (1, 2)]
    assert len(part_files(posix, upload_id)) == 2
    await complete(posix, upload_id, parts)
    assert await get(posix, "obj") == data_of(1) + data_of(2)


async def test_a_part_whose_upload_is_aborted_meanwhile_is_no_such_upload(
        posix: PosixBackend) -> None:
    upload_id = await new_upload(posix)
    await send(posix, upload_id, 1, data_of(1))
    held = asyncio.Event()
    body = Declared(data_of(2), held=held)
    late = asyncio.ensure_future(posix.upload_part("bkt", "obj", upload_id, 2, body))
    await body.started.wait()
    await posix.abort_multipart_upload("bkt", "obj", upload_id)
    held.set()
    with pytest.raises(NoSuchUpload):
        await late


@pytest.mark.parametrize("refused_from", ["the first part", "the completion"])
async def test_a_file_system_without_hard_links_copies_as_before(
        posix: PosixBackend, monkeypatch: pytest.MonkeyPatch, refused_from: str) -> None:
    # Fault injected: link(2) refused with EPERM, as on file systems without hard links
    # (some network and FAT-like ones), which this machine's tmp directory is not.
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    upload_id = await new_upload(posix)
    if refused_from == "the first part":
        monkeypatch.setattr(os, "link", refuse)
    parts = [await send(posix, upload_id, n, data_of(n)) for n in (1, 2)]
    monkeypatch.setattr(os, "link", refuse)
    await complete(posix, upload_id, parts)
    assert await get(posix, "obj") == data_of(1) + data_of(2)
    assert not upload_dir(posix, upload_id).exists()
