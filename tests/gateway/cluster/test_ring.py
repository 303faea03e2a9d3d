"""Ownership by rendezvous hashing: stable, balanced, minimal movement, routing keys."""

from __future__ import annotations

from collections import Counter

import pytest

from backends.core.internal_keys import record_base
from gateway.cluster.ring import (
    Ring,
    normalize_url,
    owner_index,
    routing_key,
    weight,
    worker_index,
)
from gateway.versioning.records import parse_record, record_key

MEMBERS = ("http://squall-0.squall-headless.ns.svc.cluster.local:9000",
           "http://squall-1.squall-headless.ns.svc.cluster.local:9000",
           "http://squall-2.squall-headless.ns.svc.cluster.local:9000")
KEYS = [f"dir-{i % 37}/object-{i}" for i in range(6000)]


def test_routing_key_is_the_key_except_for_version_records() -> None:
    assert routing_key("a/b.txt") == "a/b.txt"
    assert routing_key("\x7fv/a/b.txt\t\t0001") == "a/b.txt"
    # a tab in the user key is escaped as "\t\n" inside the record key
    assert routing_key("\x7fv/tab\t\nkey\t\t0002") == "tab\tkey"
    assert routing_key("\x7fv/ends-with-tab\t\n\t\tnull") == "ends-with-tab\t"
    assert routing_key("\x7fb/versioning") == "\x7fb/versioning"
    assert routing_key("\x7fv/no-separator") == "\x7fv/no-separator"


def test_versions_live_on_the_key_owner() -> None:
    for key in ("a", "x/y/z", "with\ttab"):
        escaped = key.replace("\t", "\t\n")
        for version in ("null", "0000017f-abc", "zz"):
            record = f"\x7fv/{escaped}\t\t{version}"
            assert owner_index(MEMBERS, "bkt", record) == owner_index(MEMBERS, "bkt", key)


@pytest.mark.parametrize("key", ["a", "x/y/z", "with\ttab", "\t", "tab\t\tpair\t",
                                 "nl\n\t\n", "\u65e5\t\u672c"])
def test_the_ring_reads_the_records_the_versioning_layer_writes(key: str) -> None:
    """One record key format (backends.core.internal_keys) for both layers."""
    for null, marker in ((False, False), (True, False), (False, True), (True, True)):
        record = record_key(key, "0661261f0f6b3e30c748f5ab", null=null, marker=marker)
        assert record.startswith(record_base(key))
        assert routing_key(record) == key
        parsed = parse_record(record)
        assert parsed is not None and parsed.key == key


def test_owners_are_pinned() -> None:
    """The hash is part of the protocol (clients compute owners): it must never change."""
    owners = [owner_index(MEMBERS, "bucket", k) for k in ("a", "b", "c", "photos/1.jpg",
                                                          "\u00e9t\u00e9", "x" * 1024)]
    assert owners == PINNED
    assert weight(MEMBERS[0], "bucket", "a") == PINNED_WEIGHT


PINNED = [2, 2, 0, 0, 0, 2]
PINNED_WEIGHT = 15266810619279858142


def test_balance_across_three_members() -> None:
    counts = Counter(owner_index(MEMBERS, "bkt", k) for k in KEYS)
    for member in range(3):
        assert abs(counts[member] / len(KEYS) - 1 / 3) < 0.03, counts


def test_order_of_the_list_does_not_change_owners() -> None:
    reordered = (MEMBERS[2], MEMBERS[0], MEMBERS[1])
    for key in KEYS[:500]:
        assert MEMBERS[owner_index(MEMBERS, "b", key)] == \
            reordered[owner_index(reordered, "b", key)]


def test_adding_a_member_moves_only_the_keys_it_takes() -> None:
    grown = (*MEMBERS, "http://squall-3.squall-headless.ns.svc.cluster.local:9000")
    moved = 0
    for key in KEYS:
        before = MEMBERS[owner_index(MEMBERS, "b", key)]
        after = grown[owner_index(grown, "b", key)]
        if before != after:
            assert after == grown[3]
            moved += 1
    assert abs(moved / len(KEYS) - 1 / 4) < 0.03


def test_bucket_is_part_of_the_hash() -> None:
    differ = sum(owner_index(MEMBERS, "one", k) != owner_index(MEMBERS, "two", k)
                 for k in KEYS[:600])
    assert differ > 300


def test_ring_ownership_and_id() -> None:
    rings = [Ring.of(list(MEMBERS), i) for i in range(3)]
    assert len({r.id for r in rings}) == 1
    assert Ring.of(list(reversed(MEMBERS)), 0).id != rings[0].id
    for key in KEYS[:300]:
        assert sum(r.owns("b", key) for r in rings) == 1
    assert Ring.of(["http://solo:9000"], 0).owns("b", "anything")


@pytest.mark.parametrize("url,expected", [
    ("http://Squall-0.Example:9000/", "http://squall-0.example:9000"),
    ("HTTPS://host", "https://host"),
    ("http://[::1]:9000", "http://[::1]:9000"),
    ("  http://169.254.0.1:80 ", "http://169.254.0.1:80"),
])
def test_normalize_url(url: str, expected: str) -> None:
    assert normalize_url(url) == expected


@pytest.mark.parametrize("url", ["squall-0:9000", "ftp://host", "http://host/path",
                                 "http://host:99999", "http://user@host", "http://",
                                 "http://host?x=1"])
def test_bad_peer_urls(url: str) -> None:
    with pytest.raises(ValueError, match="peer URL"):
        normalize_url(url)


def test_bad_rings() -> None:
    with pytest.raises(ValueError, match="distinct"):
        Ring.of(["http://a:1", "http://A:1"], 0)
    with pytest.raises(ValueError, match="not an index"):
        Ring.of(["http://a:1", "http://b:1"], 2)
    with pytest.raises(ValueError, match="at least one"):
        Ring((), 0)


HOSTS = ("http://a:1", "http://b:1", "http://c:1")


def test_a_ring_of_hosts_workers_finds_the_host_then_the_worker() -> None:
    """A client that knows only the hosts finds the right host; every host gives a key
    to the same worker index; every worker of every host owns keys."""
    ring = Ring.of_hosts(HOSTS, 1, 2, 1)
    assert ring.members == ("http://a:1/worker-0", "http://a:1/worker-1",
                            "http://b:1/worker-0", "http://b:1/worker-1",
                            "http://c:1/worker-0", "http://c:1/worker-1")
    assert (ring.self_index, ring.hosts, ring.url_of(4)) == (3, HOSTS, "http://c:1")
    owners: Counter[int] = Counter()
    for i in range(3000):
        key = f"k{i}"
        owner = ring.owner("b", key)
        assert owner // 2 == owner_index(HOSTS, "b", key)
        assert owner % 2 == worker_index(2, "b", key)
        owners[owner] += 1
    assert all(400 < owners[m] < 600 for m in range(6)), owners
    assert ring.owns("b", next(f"k{i}" for i in range(100) if ring.owner("b", f"k{i}") == 3))


def test_a_ring_of_single_process_hosts_is_the_ring_of_the_hosts() -> None:
    assert Ring.of_hosts(HOSTS, 2, 1, 0) == Ring(HOSTS, 2)
    assert Ring(HOSTS, 2).hosts == HOSTS and Ring(HOSTS, 2).url_of(1) == HOSTS[1]
    assert Ring.of_hosts(HOSTS, 0, 2, 0).id != Ring(HOSTS, 0).id  # members must agree


def test_bad_rings_of_workers() -> None:
    with pytest.raises(ValueError, match="not hosts of 2 workers"):
        Ring(("http://a:1/worker-0", "http://a:1/worker-1", "http://b:1/worker-0"), 0, 2)
    with pytest.raises(ValueError, match="worker 2 is not one of 2"):
        Ring.of_hosts(HOSTS, 0, 2, 2)
