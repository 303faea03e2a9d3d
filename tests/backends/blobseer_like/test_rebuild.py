"""The data set survives the loss of the gateway's local state: the index is rebuilt
from the records on the providers (automatically, or with ``squall fsck --rebuild``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from backends.blobseer_like import BlobseerBackend
from backends.core.base import CompletedPart, ObjectMeta
from tests.backends.blobseer_like.conftest import CHUNK, MIN_PART, Factory
from tests.backends.blobseer_like.support import get, put
from tests.backends.conformance import FULL_META, blob, body_of, collect

INTERNAL = "\x7fv/dir%2Fkey\t\t0001700000000000000-aa\n" + "x" * 2000


async def fill(store: BlobseerBackend) -> dict[str, bytes]:
    await store.create_bucket("bkt")
    await store.create_bucket("empty")
    objects = {"plain": blob(3 * CHUNK + 1, seed=1), "meta": b"with metadata",
               INTERNAL: b"a noncurrent version", "over": blob(CHUNK, seed=2)}
    await put(store, "plain", objects["plain"])
    await put(store, "meta", objects["meta"], meta=FULL_META)
    await put(store, INTERNAL, objects[INTERNAL])
    await put(store, "over", b"first")
    await put(store, "over", objects["over"])
    await put(store, "gone", b"deleted")
    await store.delete_object("bkt", "gone")
    await store.copy_object("bkt", "plain", "bkt", "copy", meta=ObjectMeta(tags={"c": "1"}))
    objects["copy"] = objects["plain"]
    return objects


async def check(store: BlobseerBackend, objects: dict[str, bytes]) -> None:
    assert [b.name for b in await store.list_buckets()] == ["bkt", "empty"]
    infos = await collect(store.iter_objects("bkt"))
    assert [i.key for i in infos] == sorted(objects, key=lambda k: k.encode())
    for key, data in objects.items():
        assert await get(store, key) == data
    assert (await store.head_object("bkt", "meta")).meta == FULL_META
    assert (await store.head_object("bkt", "copy")).meta.tags == {"c": "1"}


async def test_index_rebuilt_when_lost(tmp_path: Path, make: Factory) -> None:
    store = make()
    objects = await fill(store)
    upload = await store.create_multipart_upload("bkt", "mp", meta=ObjectMeta(user={"u": "1"}))
    part = await store.upload_part("bkt", "mp", upload.upload_id, 1,
                                   body_of(blob(MIN_PART, seed=5)))
    await store.upload_part("bkt", "mp", upload.upload_id, 1, body_of(blob(MIN_PART, seed=6)))
    await store.aclose()
    shutil.rmtree(tmp_path / "data")  # the gateway's whole local state

    again = make()
    await check(again, objects)
    assert again.store.rebuilt is not None and again.store.rebuilt.versions == len(objects)
    [listed] = await collect(again.iter_multipart_uploads("bkt"))
    assert (listed.upload_id, listed.meta.user) == (upload.upload_id, {"u": "1"})
    [stored] = await again.list_parts("bkt", "mp", upload.upload_id)
    assert stored.etag != part.etag  # the replacement, not the first part 1
    info = await again.complete_multipart_upload("bkt", "mp", upload.upload_id,
                                                 [CompletedPart(1, stored.etag)])
    assert await get(again, "mp") == blob(MIN_PART, seed=6) and info.etag.endswith("-1")
    # New versions sort after the rebuilt ones; garbage found in the rebuilt index goes.
    await put(again, "over", b"third")
    assert await get(again, "over") == b"third"
    await again.collect_garbage()
    await again.collect_garbage()
    await again.aclose()
    shutil.rmtree(tmp_path / "data")
    third = make()
    objects["over"], objects["mp"] = b"third", blob(MIN_PART, seed=6)
    await check(third, objects)


async def test_records_survive_the_loss_of_one_provider(tmp_path: Path,
                                                        make: Factory) -> None:
    store = make(providers=3)
    objects = await fill(store)
    await store.aclose()
    shutil.rmtree(tmp_path / "data")
    # Provider p1 loses every record (its chunks stay): the other copies suffice.
    shutil.rmtree(tmp_path / "p1" / "records")
    (tmp_path / "p1" / "records").mkdir()
    for bucket in (tmp_path / "p1" / "buckets").iterdir():
        bucket.unlink()
    again = make(providers=3)
    await check(again, objects)


def squall(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway.commands.cli", *args], capture_output=True,
                          text=True, timeout=120, check=False)


async def test_fsck_cli(tmp_path: Path, make: Factory) -> None:
    store = make(providers=2)
    objects = await fill(store)
    spec = f"blobseer_like:{tmp_path}/p0,{tmp_path}/p1?chunk={CHUNK}"
    args = ["fsck", "--backend", spec, "--data-dir", str(tmp_path / "data")]
    busy = squall(*args)  # the store is open here: its providers are locked
    assert busy.returncode == 2 and "in use by another process" in busy.stderr
    await store.aclose()
    done = squall(*args, "--rebuild", "--verify-data", "--gc")
    assert done.returncode == 0, done.stderr
    assert "index rebuilt: 2 buckets, 5 objects" in done.stdout
    assert "store is consistent" in done.stdout
    again = make(providers=2)
    await check(again, objects)
    await again.aclose()
    wrong = squall("fsck", "--backend", f"posix:{tmp_path}/x")
    assert wrong.returncode == 2 and "blobseer_like" in wrong.stderr
    victim = next(p for p in (tmp_path / "p0" / "chunks").rglob("*") if p.is_file())
    victim.unlink()
    damaged = squall(*args)
    assert damaged.returncode == 1 and "missing:" in damaged.stdout
