"""The mount's namespace over the session's gateway (no FUSE): lookups in directories made
here, within and past the bound of a kept listing."""

from __future__ import annotations

import uuid

from gateway.client.credentials import Credentials
from gateway.fuse_mount.attrs import AttrCache
from gateway.fuse_mount.listings import Listings
from gateway.fuse_mount.namespace import Namespace
from gateway.fuse_mount.store import BucketClient
from tests.gateway.fuse_mount.test_metadata import requests_at
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess


def namespace(squall: SquallProcess, bucket: str, *, ttl: float = 30.0,
              max_entries: int = 5) -> Namespace:
    store = BucketClient(squall.endpoint, bucket, Credentials(ACCESS_KEY, SECRET_KEY))
    return Namespace(store, AttrCache(ttl), Listings(ttl, max_entries=max_entries))


def create(ns: Namespace, path: str) -> None:
    """What a create through the mount does to the namespace: lookup, then the file."""
    assert ns.lookup(path) is None
    ns.created(path)
    ns._store.put(path.strip("/"), path.encode(), {})


def test_creates_in_a_kept_directory_need_no_lookup_request(squall: SquallProcess, s3,
                                                            bucket: str) -> None:
    ns = namespace(squall, bucket)
    directory = f"/kept-{uuid.uuid4().hex[:8]}"
    ns.mkdir(directory)
    before = requests_at(squall)
    for i in range(5):
        create(ns, f"{directory}/f{i}")
    spent = requests_at(squall) - before
    assert spent == {"PutObject": 5}, spent
    assert sorted(name for name, _ in ns.listdir(directory)) == [f"f{i}" for i in range(5)]


def test_a_directory_past_the_bound_is_looked_up_name_by_name(squall: SquallProcess, s3,
                                                              bucket: str) -> None:
    ns = namespace(squall, bucket, max_entries=5)
    directory = f"/past-{uuid.uuid4().hex[:8]}"
    ns.mkdir(directory)
    for i in range(8):
        create(ns, f"{directory}/f{i}")
    ns.mkdir(f"{directory}/sub")
    s3.put_object(Bucket=bucket, Key=f"{directory[1:]}/other", Body=b"boto3")
    ns.cache.invalidate_tree(directory)  # what the TTL does to attributes
    before = requests_at(squall)
    assert ns.lookup(f"{directory}/missing") is None
    f3, sub, other = (ns.lookup(f"{directory}/{n}") for n in ("f3", "sub", "other"))
    assert f3 is not None and not f3.is_dir and f3.size == len(f"{directory}/f3")
    assert sub is not None and sub.is_dir
    assert other is not None and other.size == 5  # another client's name: seen at once
    spent = requests_at(squall) - before
    # name by name: a HeadObject per lookup, and a listing for each that is not a file
    assert spent == {"HeadObject": 4, "ListObjectsV2": 2}, spent
    names = sorted(name for name, _ in ns.listdir(directory))
    assert names == sorted([f"f{i}" for i in range(8)] + ["sub", "other"])
