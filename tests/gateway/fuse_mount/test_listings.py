"""Listings of directories made by the mount: what they answer, and for how long."""

from __future__ import annotations

import pytest

from gateway.fuse_mount import listings as listings_module
from gateway.fuse_mount.listings import Listings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(listings_module.time, "monotonic", clock)
    return clock


def test_a_directory_made_here_is_known_empty_and_kept_up_to_date(clock: Clock) -> None:
    listings = Listings(ttl=1.0)
    assert listings.names("/new") is None
    listings.made("/new")
    assert listings.names("/new") == {}
    listings.added("/new", "f")
    listings.added("/new", "sub", is_dir=True)
    assert listings.names("/new") == {"f": False, "sub": True}
    listings.added("/new", "sub")  # a file named like a directory hides it
    listings.added("/new", "f", is_dir=True)
    assert listings.names("/new") == {"f": False, "sub": False}
    listings.removed("/new", "f")
    assert listings.names("/new") == {"sub": False}


def test_expired_listings_are_fetched_again_only_for_directories_made_here(
        clock: Clock) -> None:
    listings = Listings(ttl=1.0)
    listings.made("/new")
    listings.refresh("/other", {"x": False})  # listed, but not made here: not kept
    assert listings.names("/other") is None and not listings.wanted("/other")
    assert not listings.wanted("/new")  # fresh
    clock.now += 1.5
    assert listings.names("/new") is None and listings.wanted("/new")
    listings.refresh("/new", {"a": False})
    assert listings.names("/new") == {"a": False} and not listings.wanted("/new")
    listings.refresh("/new", None)  # outgrew one page: looked up name by name
    clock.now += 1.5
    assert listings.names("/new") is None and not listings.wanted("/new")


def test_forget_tree_and_no_ttl(clock: Clock) -> None:
    listings = Listings(ttl=1.0)
    for d in ("/a", "/a/b", "/ab"):
        listings.made(d)
    listings.forget_tree("/a")
    assert listings.names("/a") is None and listings.names("/a/b") is None
    assert listings.names("/ab") == {}
    uncached = Listings(ttl=0)
    uncached.made("/a")
    assert uncached.names("/a") is None and not uncached.wanted("/a")
