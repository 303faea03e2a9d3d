"""The saved member list of live membership changes, and the client-request gate."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from backends.errors import ServiceUnavailable
from gateway.cluster import membership
from gateway.cluster.membership import Membership, load, save
from gateway.cluster.ring import Ring, fingerprint

OLD = ("http://a:1", "http://b:1")
NEW = ("http://a:1", "http://b:1", "http://c:1")


def test_a_saved_list_is_kept_while_the_peers_flag_is_the_same(tmp_path: Path) -> None:
    path = tmp_path / "cluster-members.json"
    assert load(path, OLD) is None
    save(path, 3, NEW, OLD)
    assert json.loads(path.read_text()) == {"version": 3, "members": list(NEW),
                                            "base": list(OLD)}
    assert load(path, OLD) == (3, NEW)


def test_a_new_peers_flag_drops_the_saved_list(tmp_path: Path) -> None:
    path = tmp_path / "cluster-members.json"
    save(path, 3, NEW, OLD)
    assert load(path, NEW) is None
    assert not path.exists()


def _member(*, joining: bool = False) -> Membership:
    node: Any = SimpleNamespace(ring=Ring(NEW, 2))
    return Membership(node, version=0, path=None, joining=joining, base=OLD)


def test_a_joining_member_refuses_until_a_change_names_it() -> None:
    async def scenario() -> None:
        joiner = _member(joining=True)
        with pytest.raises(ServiceUnavailable, match="has not joined the cluster yet"):
            await joiner.wait_open()
        await joiner.freeze(1, NEW, current=-1)
        assert joiner.pending_id == fingerprint(NEW) and joiner.refusal() is None
        joiner.abort(1)
        assert joiner.pending is None and not joiner.gate.is_set()
    asyncio.run(scenario())


def test_a_freeze_holds_requests_until_the_change_ends(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    monkeypatch.setattr(membership, "HOLD_TIMEOUT_S", 0.2)

    async def scenario() -> None:
        member = _member()
        assert member.gate.is_set()
        with pytest.raises(ServiceUnavailable, match="not this member's"):
            await member.freeze(1, NEW, current=5)
        await member.freeze(1, NEW, current=0)
        with pytest.raises(ServiceUnavailable, match="another membership change"):
            await member.freeze(2, OLD, current=0)
        with pytest.raises(ServiceUnavailable, match="member list is changing"):
            await member.wait_open()
        waiting = asyncio.ensure_future(member.wait_committed(fingerprint(NEW)))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        member.abort(1)
        await asyncio.wait_for(waiting, 1)
        assert member.gate.is_set()
        await member.wait_open()
    asyncio.run(scenario())


def test_versions_heard_from_members_started_otherwise_are_ignored() -> None:
    async def scenario() -> None:
        member = _member()
        member.heard(1, NEW, fingerprint(NEW))  # another --peers list: not ours
        member.heard(0, NEW, fingerprint(OLD))  # not newer
        assert not member._tasks
    asyncio.run(scenario())
