"""The membership view: owners, preference lists and mirrors, for hosts and workers."""

from __future__ import annotations

import pytest

from gateway.cluster.ring import Ring, owner_index
from gateway.cluster.view import Member, View, member_id

HOSTS = [f"http://169.254.0.{i}:9000" for i in range(1, 6)]
KEYS = [f"key-{i}" for i in range(2000)]


def view(hosts: list[str], *, workers: int = 1, me: str | None = None, revision: int = 7,
         held: frozenset[str] = frozenset(), missing: frozenset[str] = frozenset()) -> View:
    members = {}
    for host in hosts:
        for k in range(workers):
            m = Member.of(host, k, workers, held=host in held)
            if m.name not in missing:
                members[m.name] = m
    return View(revision, members, me or next(iter(members)))


def test_a_static_ring_and_its_view_agree_on_every_owner() -> None:
    ring = Ring.of(HOSTS[:3], 1)
    static = View.static(ring)
    assert static.revision == 0 and static.me == HOSTS[1] and static.token.startswith("s")
    for key in KEYS[:300]:
        assert static.owner("b", key) == HOSTS[owner_index(HOSTS[:3], "b", key)]
    workers = Ring.of_hosts(HOSTS[:3], 2, 4, 3)
    hosts_view = View.static(workers)
    assert hosts_view.me == f"{HOSTS[2]}/worker-3"
    for key in KEYS[:300]:
        assert hosts_view.owner("b", key) == workers.members[workers.owner("b", key)]


def test_adding_a_member_moves_only_the_keys_it_gains() -> None:
    before, after = view(HOSTS[:3]), view(HOSTS[:4])
    moved = [k for k in KEYS if before.owner("b", k) != after.owner("b", k)]
    assert moved and all(after.owner("b", k) == HOSTS[3] for k in moved)
    assert 0.15 < len(moved) / len(KEYS) < 0.35  # about a quarter
    # a member that goes: its keys go to the next of their preference list
    gone = view([h for h in HOSTS[:4] if h != HOSTS[1]])
    for key in KEYS:
        if after.owner("b", key) == HOSTS[1]:
            assert gone.owner("b", key) == after.preference("b", key)[1]
        else:
            assert gone.owner("b", key) == after.owner("b", key)


def test_mirrors_are_the_next_members_on_other_hosts_with_a_lease() -> None:
    three = view(HOSTS[:3])
    for key in KEYS[:200]:
        order = three.preference("b", key)
        assert order[0] == three.owner("b", key)
        assert three.mirrors("b", key, 2) == order[1:2]
        assert three.mirrors("b", key, 3) == order[1:3]
        assert three.mirrors("b", key, 1) == []
    held = view(HOSTS[:3], held=frozenset({HOSTS[2]}))
    for key in KEYS[:200]:
        assert HOSTS[2] not in held.mirrors("b", key, 3)  # a held member has no lease
    workers = view(HOSTS[:3], workers=2)
    for key in KEYS[:200]:
        owner = workers.members[workers.owner("b", key)]
        mirrors = [workers.members[n] for n in workers.mirrors("b", key, 3)]
        assert len(mirrors) == 2 and all(m.host != owner.host for m in mirrors)
        assert all(m.worker == owner.worker for m in mirrors)


def test_a_host_without_the_keys_worker_is_passed_over() -> None:
    full = view(HOSTS[:3], workers=2)
    missing = f"{HOSTS[0]}/worker-1"
    partial = view(HOSTS[:3], workers=2, missing=frozenset({missing}))
    for key in KEYS[:300]:
        if full.owner("b", key) == missing:
            assert partial.owner("b", key) == full.preference("b", key)[1]
        else:
            assert partial.owner("b", key) == full.owner("b", key)
    assert View(3, {}, "x").owner("b", "k") is None


def test_members_are_named_by_short_ids_and_views_by_revision() -> None:
    v = view(HOSTS[:2], me=HOSTS[1])
    assert v.name_of(member_id(HOSTS[0])) == HOSTS[0] and v.name_of("0" * 16) is None
    assert v.others() == [HOSTS[0]] and v.mine and v.token == "7"
    assert not View(7, v.members, "http://elsewhere:1").mine
    assert len(member_id(HOSTS[0])) == 16 and ":" not in member_id(HOSTS[0])


def test_owners_and_mirrors_are_computed_once_per_view_and_key(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A view remembers each key's owner and mirrors (a request asks several times);
    another view computes its own, and a full memo starts again without changing any
    answer."""
    three, four = view(HOSTS[:3]), view(HOSTS[:4], revision=8)
    first = {key: (three.owner("b", key), three.mirrors("b", key, 2)) for key in KEYS}
    moved = [k for k in KEYS if four.owner("b", k) != first[k][0]]
    assert moved and all(four.owner("b", k) == HOSTS[3] for k in moved)
    monkeypatch.setattr("gateway.cluster.view.weight", lambda *_: 1 / 0)  # not hashed again
    assert {key: (three.owner("b", key), three.mirrors("b", key, 2)) for key in KEYS} == first
    monkeypatch.undo()
    monkeypatch.setattr("gateway.cluster.view.MEMO_KEYS", 100)
    small = view(HOSTS[:3])
    assert all((small.owner("b", k), small.mirrors("b", k, 2)) == first[k] for k in KEYS)
