"""The shared mapping's layout upstream, and the move of markers from the first layout.

Against a real upstream Squall and a real MinIO (skipped where MinIO is not installed):
MinIO keeps objects as a file tree, where an object ``b`` and the keys under ``b/`` share
one directory and only one of them is listed.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from backends.core.base import ObjectMeta
from backends.s3 import S3Backend, S3Config
from tests.backends.conformance import body_of, collect, read_all
from tests.support.server import ACCESS_KEY, SECRET_KEY

OBJECTS = ["rank0/step0", "rank0/step1", "rank0/step2"]


@dataclass(frozen=True, slots=True)
class Store:
    """An upstream S3 service: its endpoint and a plain boto3 client on it."""

    endpoint: str
    s3: Any


@pytest.fixture(params=["squall", "minio"])
def store(request: pytest.FixtureRequest) -> Store:
    if request.param == "squall":
        server, client = (request.getfixturevalue("upstream_squall"),
                          request.getfixturevalue("squall_s3"))
    else:
        server, client = request.getfixturevalue("minio"), request.getfixturevalue("minio_s3")
    return Store(server.endpoint, client)


@pytest.fixture
def shared(store: Store) -> Iterator[str]:
    """A fresh upstream bucket for one test's shared mapping."""
    name = f"shared-{uuid.uuid4().hex[:12]}"
    store.s3.create_bucket(Bucket=name)
    yield name


@pytest.fixture
async def backends(store: Store, shared: str,
                   tmp_path: Path) -> AsyncIterator[list[S3Backend]]:
    """Two backends on ``shared`` with prefix ``sq/``, as two gateway processes."""
    made = [S3Backend(S3Config(endpoint=store.endpoint, access_key=ACCESS_KEY,
                               secret_key=SECRET_KEY, bucket=shared, prefix="sq/"),
                      spool_dir=tmp_path / f"spool{i}") for i in range(2)]
    yield made
    for backend in made:
        await backend.aclose()


def upstream_keys(store: Store, bucket: str) -> list[str]:
    paginator = store.s3.get_paginator("list_objects_v2")
    return [entry["Key"] for page in paginator.paginate(Bucket=bucket)
            for entry in page.get("Contents", [])]


def path_prefixes(keys: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs (a, b) of keys where ``a`` names a directory of ``b`` (b starts with a + "/")."""
    present = set(keys)
    return [(key[:i], key) for key in present for i, c in enumerate(key)
            if c == "/" and key[:i] in present]


def write_first_layout(store: Store, bucket: str, buckets: dict[str, list[str]]) -> None:
    """What the first layout wrote: an empty ``sq/<b>`` beside the keys ``sq/<b>/<key>``."""
    for name, keys in buckets.items():
        store.s3.put_object(Bucket=bucket, Key=f"sq/{name}", Body=b"")
        for key in keys:
            store.s3.put_object(Bucket=bucket, Key=f"sq/{name}/{key}", Body=key.encode())


async def keys_of(backend: S3Backend, bucket: str) -> list[str]:
    return [info.key for info in await collect(backend.iter_objects(bucket))]


async def test_markers_are_no_path_prefix_of_any_key(store: Store, shared: str,
                                                     backends: list[S3Backend]) -> None:
    backend = backends[0]
    for name in ("ckpt", "ckpt2"):
        await backend.create_bucket(name)
        for key in OBJECTS:
            await backend.put_object(name, key, body_of(key.encode()), meta=ObjectMeta())
    assert await keys_of(backend, "ckpt") == OBJECTS  # the marker is not listed
    assert [b.name for b in await backend.list_buckets()] == ["ckpt", "ckpt2"]
    keys = upstream_keys(store, shared)
    assert keys == sorted(["sq/.squall/buckets/ckpt", "sq/.squall/buckets/ckpt2",
                           *(f"sq/ckpt/{k}" for k in OBJECTS),
                           *(f"sq/ckpt2/{k}" for k in OBJECTS)])
    assert path_prefixes(keys) == []
    top = store.s3.list_objects_v2(Bucket=shared, Prefix="sq/", Delimiter="/")
    assert "Contents" not in top
    assert [p["Prefix"] for p in top["CommonPrefixes"]] == ["sq/.squall/", "sq/ckpt/",
                                                            "sq/ckpt2/"]
    for name in ("ckpt", "ckpt2"):
        for key in OBJECTS:
            await backend.delete_object(name, key)
        await backend.delete_bucket(name)
    assert upstream_keys(store, shared) == []


async def test_first_layout_is_moved_at_first_use(store: Store, shared: str,
                                                  backends: list[S3Backend]) -> None:
    write_first_layout(store, shared, {"ckpt": OBJECTS, "empty": [], "half": ["k"]})
    # "half" was being moved when its mover stopped: both markers are there.
    store.s3.put_object(Bucket=shared, Key="sq/.squall/buckets/half", Body=b"")
    # Not markers: a non-empty object, a name no bucket has, keys beside the prefix.
    store.s3.put_object(Bucket=shared, Key="sq/notes.txt", Body=b"not a marker")
    store.s3.put_object(Bucket=shared, Key="sq/.hidden", Body=b"")
    store.s3.put_object(Bucket=shared, Key="outside", Body=b"")

    backend = backends[0]
    assert [b.name for b in await backend.list_buckets()] == ["ckpt", "empty", "half"]
    assert await keys_of(backend, "ckpt") == OBJECTS
    for key in OBJECTS:
        assert await read_all(await backend.get_object("ckpt", key)) == key.encode()
    assert await keys_of(backend, "half") == ["k"]
    keys = upstream_keys(store, shared)
    assert keys == sorted(["outside", "sq/.hidden",
                           "sq/.squall/buckets/ckpt", "sq/.squall/buckets/empty",
                           "sq/.squall/buckets/half", "sq/half/k", "sq/notes.txt",
                           *(f"sq/ckpt/{k}" for k in OBJECTS)])
    assert path_prefixes(keys) == []
    await backend.delete_bucket("empty")
    assert [b.name for b in await backends[1].list_buckets()] == ["ckpt", "half"]


async def test_processes_move_the_same_markers_at_once(store: Store, shared: str,
                                                       backends: list[S3Backend]) -> None:
    write_first_layout(store, shared, {f"b{i}": ["k"] for i in range(8)})
    listed = await asyncio.gather(*(b.list_buckets() for b in backends))
    assert [[b.name for b in found] for found in listed] == [[f"b{i}" for i in range(8)]] * 2
    keys = upstream_keys(store, shared)
    assert keys == sorted([f"sq/.squall/buckets/b{i}" for i in range(8)]
                          + [f"sq/b{i}/k" for i in range(8)])


async def test_first_layout_marker_written_later_is_moved_when_touched(
        store: Store, shared: str, backends: list[S3Backend]) -> None:
    backend = backends[0]
    assert await backend.list_buckets() == []  # the sweep is done: nothing to move
    # A process of the previous version creates a bucket and writes to it.
    write_first_layout(store, shared, {"late": OBJECTS})
    assert (await backend.head_bucket("late")).name == "late"
    assert await keys_of(backend, "late") == OBJECTS
    assert "sq/late" not in upstream_keys(store, shared)
    assert [b.name for b in await backend.list_buckets()] == ["late"]
