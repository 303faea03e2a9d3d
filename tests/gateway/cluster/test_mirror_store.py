"""The mirror store: durable copies (small ones in RocksDB, large ones in files), newest
per key, dropped up to a version."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from backends.core.base import ObjectInfo
from backends.core.streams import body_of
from gateway.cluster.mirror_store import INLINE_MAX, MirrorRecord, MirrorStore
from tests.support.tmpfs import fill, small_filesystem

OWNER = "http://169.254.0.1:9000"


def _info(size: int) -> ObjectInfo:
    return ObjectInfo(bucket="b", key="k", size=size, etag="e" * 32, last_modified=0.0)


async def _read(store: MirrorStore) -> bytes:
    record = store.records[("b", "k")]
    return b"".join([chunk async for chunk in store.read(record)])


def test_copies_are_kept_across_a_restart_newest_first(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = MirrorStore(tmp_path)
        await store.load()
        assert await store.put("b", "k", owner=OWNER, epoch=4, seq=7, info=_info(3),
                               body=body_of(b"abc"))
        # an older copy arriving late is read and discarded; a newer one replaces it
        assert not await store.put("b", "k", owner=OWNER, epoch=3, seq=99, info=_info(3),
                                   body=body_of(b"old"))
        assert await store.put("b", "k", owner=OWNER, epoch=5, seq=1, info=_info(4),
                               body=body_of(b"newr"))
        await store.close()
        again = MirrorStore(tmp_path)
        await again.load()
        record = again.records[("b", "k")]
        assert (record.owner, record.version) == (OWNER, (5, 1))
        assert await _read(again) == b"newr"
        assert again.held_for(OWNER) == [record] and again.held_for("other") == []
    asyncio.run(scenario())


def test_drops_go_up_to_the_version_given(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = MirrorStore(tmp_path)
        await store.load()
        await store.put("b", "k", owner=OWNER, epoch=4, seq=7, info=None, body=body_of(b""))
        assert await store.drop([("b", "k", 4, 6)]) == 0  # an older write was flushed
        assert await store.drop([("b", "k", 4, 7)]) == 1
        assert store.records == {}
    asyncio.run(scenario())
    assert not list(tmp_path.glob("*.mir"))


def test_files_of_another_format_are_dropped_at_start(tmp_path: Path) -> None:
    old = {"v": 1, "bucket": "b", "key": "k", "owner": 1, "epoch": 4, "seq": 7, "info": None}
    (tmp_path / "x.mir").write_text(json.dumps(old) + "\n")
    (tmp_path / "epochs.json").write_text("{}")

    async def scenario() -> None:
        store = MirrorStore(tmp_path)
        await store.load()
        assert store.records == {}
    asyncio.run(scenario())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copies"]  # the database


def test_clear_drops_every_copy(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = MirrorStore(tmp_path)
        await store.load()
        await store.put("b", "k", owner=OWNER, epoch=1, seq=1, info=_info(3),
                        body=body_of(b"abc"))
        assert await store.clear() == 1
        await store.close()
        again = MirrorStore(tmp_path)
        await again.load()
        assert again.records == {}
    asyncio.run(scenario())


def test_copies_arriving_together_are_all_kept_as_one_group(tmp_path: Path) -> None:
    """Small copies written at once share a group commit: each is durable (read back
    after a restart) with its own bytes, and no temporary file is left."""
    async def scenario() -> None:
        store = MirrorStore(tmp_path)
        await store.load()
        kept = await asyncio.gather(*(
            store.put("b", f"k{i}", owner=OWNER, epoch=2, seq=i, info=_info(4),
                      body=body_of(f"v{i:03d}".encode())) for i in range(24)))
        assert all(kept)
        assert 0 < store._commits.groups <= 24 and store._commits.batches == 24
        await store.close()
        again = MirrorStore(tmp_path)
        await again.load()
        assert len(again.records) == 24
        for i in range(24):
            record = again.records[("b", f"k{i}")]
            assert record.seq == i
            body = b"".join([c async for c in again.read(record)])
            assert body == f"v{i:03d}".encode()
    asyncio.run(scenario())
    assert not list(tmp_path.glob(".tmp-*"))


def test_a_group_that_cannot_be_written_keeps_nothing(tmp_path: Path) -> None:
    """Copies that cannot be written (the disk is full: RocksDB's WAL cannot grow) fail
    their puts, and nothing of the group is remembered."""
    with small_filesystem(tmp_path / "disk", "4m") as disk:
        async def scenario() -> None:
            store = MirrorStore(disk / "mirror")
            await store.load()
            fill(disk / "filler")
            body = b"x" * (64 << 10)
            results = await asyncio.gather(*(
                store.put("b", f"k{i}", owner=OWNER, epoch=2, seq=i, info=_info(len(body)),
                          body=body_of(body)) for i in range(3)), return_exceptions=True)
            assert all(isinstance(r, Exception) for r in results), results
            assert store.records == {}
            await store.close()
        asyncio.run(scenario())


def test_a_large_copy_is_a_file_and_replaces_a_small_one(tmp_path: Path) -> None:
    """A copy larger than INLINE_MAX streams into a file; the newer copy of a key wins
    whichever kind each is, also when both were left behind by a crash."""
    big = bytes(range(256)) * ((INLINE_MAX + 4096) // 256)
    store = MirrorStore(tmp_path)

    async def put(key: str, seq: int, body: bytes) -> MirrorRecord:
        await store.put("b", key, owner=OWNER, epoch=1, seq=seq, info=_info(len(body)),
                        body=body_of(body))
        assert b"".join([c async for c in store.read(store.records[("b", key)])]) == body
        return store.records[("b", key)]

    asyncio.run(store.load())
    assert asyncio.run(put("k", 1, b"abc")).path is None
    assert asyncio.run(put("k", 2, big)).path is not None
    assert asyncio.run(put("k", 3, b"tiny")).path is None
    assert not list(tmp_path.glob("*.mir"))
    asyncio.run(put("k2", 4, big))
    (file,) = tmp_path.glob("*.mir")
    saved = file.read_bytes()
    asyncio.run(put("k2", 5, b"ok"))
    file.write_bytes(saved)  # as if killed before the older file was removed
    asyncio.run(store.close())

    store = MirrorStore(tmp_path)
    asyncio.run(store.load())
    assert store.records[("b", "k2")].seq == 5 and store.records[("b", "k")].seq == 3
    assert not list(tmp_path.glob("*.mir"))
    asyncio.run(store.close())
