"""Listings of directories made by the mount: what they answer, and for how long."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

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


class Fetcher:
    """A directory's entries as a lister would return them; counts its calls. With a
    ``clock``, each fetch takes ``taking`` seconds of it."""

    def __init__(self, names: dict[str, bool] | None = None, *, clock: Clock | None = None,
                 taking: float = 0.0) -> None:
        self.entries = dict(names or {})
        self.calls = 0
        self._clock, self._taking = clock, taking

    def __call__(self, directory: str, max_entries: int) -> dict[str, bool] | None:
        self.calls += 1
        if self._clock is not None:
            self._clock.now += self._taking
        return dict(self.entries) if len(self.entries) <= max_entries else None


def test_expired_listings_are_fetched_again_only_for_directories_made_here(
        clock: Clock) -> None:
    listings = Listings(ttl=1.0)
    fetch = Fetcher({"a": False})
    listings.made("/new")
    pending = listings.begin("/other")  # listed, but not made here: not kept
    assert pending is None
    listings.finish(pending, {"x": False})
    assert listings.names("/other", fetch) is None and fetch.calls == 0
    assert listings.names("/new", fetch) == {} and fetch.calls == 0  # fresh
    clock.now += 1.5
    assert listings.names("/new") is None  # expired, and nothing to fetch it with
    assert listings.names("/new", fetch) == {"a": False} and fetch.calls == 1
    assert listings.names("/new", fetch) == {"a": False} and fetch.calls == 1
    clock.now += 1.5
    fetch.entries["b"] = True
    assert listings.names("/new", fetch) == {"a": False, "b": True} and fetch.calls == 2


def test_a_lookup_of_a_known_file_does_not_fetch_an_expired_listing(clock: Clock) -> None:
    """The caller asks the store about an existing file anyway (HeadObject)."""
    listings = Listings(ttl=1.0)
    listings.made("/d")
    listings.added("/d", "file")
    listings.added("/d", "sub", is_dir=True)
    clock.now += 1.5
    fetch = Fetcher({"file": False, "sub": True, "new": False})
    assert listings.names("/d", fetch, name="file") == {"file": False, "sub": True}
    assert fetch.calls == 0
    assert listings.names("/d", fetch, name="sub") == fetch.entries and fetch.calls == 1


def test_a_listing_is_fresh_for_one_ttl_from_the_start_of_its_fetch(clock: Clock) -> None:
    listings = Listings(ttl=1.0)
    listings.made("/d")
    clock.now += 1.5

    slow = Fetcher({"a": False}, clock=clock, taking=0.6)
    assert listings.names("/d", slow) == {"a": False}
    clock.now += 0.5  # 1.1 s after the fetch started
    assert listings.names("/d") is None


def test_the_mounts_own_changes_during_a_fetch_are_kept(clock: Clock) -> None:
    listings = Listings(ttl=1.0)
    listings.made("/d")
    listings.added("/d", "old")
    clock.now += 1.5

    def racing(directory: str, max_entries: int) -> dict[str, bool]:
        page = {"old": False, "gone": False}  # listed before the changes below
        listings.added("/d", "new")
        listings.removed("/d", "gone")
        listings.removed("/d", "old")
        listings.added("/d", "old", is_dir=True)
        return page

    assert listings.names("/d", racing) == {"new": False, "old": True}
    # an ls running meanwhile, started before that fetch, does not replace it
    pending = listings.begin("/d")
    clock.now += 1.5
    assert listings.names("/d", Fetcher({"x": False})) == {"x": False}
    listings.finish(pending, {"stale": False})
    assert listings.names("/d") == {"x": False}


def test_a_fetch_that_fails_is_tried_again_and_one_forgotten_meanwhile_is_dropped(
        clock: Clock) -> None:
    listings = Listings(ttl=1.0)
    listings.made("/d")
    clock.now += 1.5

    def failing(directory: str, max_entries: int) -> dict[str, bool]:
        raise OSError("connection refused")

    with pytest.raises(OSError):
        listings.names("/d", failing)
    assert listings.names("/d", Fetcher({"a": False})) == {"a": False}
    clock.now += 1.5

    def forgotten(directory: str, max_entries: int) -> dict[str, bool]:
        listings.forget_tree("/d")  # an rmdir or a rename of the directory meanwhile
        return {"a": False}

    assert listings.names("/d", forgotten) is None
    assert listings.names("/d", Fetcher({"a": False})) is None  # not tracked any more


def test_a_directory_past_the_bound_is_looked_up_name_by_name(clock: Clock) -> None:
    listings = Listings(ttl=1.0, max_entries=3)
    listings.made("/d")
    for name in "abc":
        listings.added("/d", name)
    assert listings.names("/d") == dict.fromkeys("abc", False)
    listings.added("/d", "e")  # the mount's own creates outgrow the bound
    assert listings.names("/d") is None
    clock.now += 1.5
    fetch = Fetcher(dict.fromkeys("abc", False))
    assert listings.names("/d", fetch) is None and fetch.calls == 0  # never fetched again
    pending = listings.begin("/d")  # an ls that finds it small again: kept again
    listings.finish(pending, {"a": False})
    assert listings.names("/d") == {"a": False}
    clock.now += 1.5
    fetch = Fetcher(dict.fromkeys("abcd", False))
    assert listings.names("/d", fetch) is None and fetch.calls == 1  # grown past the bound
    clock.now += 1.5
    assert listings.names("/d", fetch) is None and fetch.calls == 1


def test_a_fetch_slower_than_the_ttl_is_not_kept_and_tried_again_later(clock: Clock) -> None:
    listings = Listings(ttl=1.0)
    listings.made("/d")
    clock.now += 1.5

    slow = Fetcher({"a": False}, clock=clock, taking=1.2)
    assert listings.names("/d", slow) is None
    clock.now += 10  # name by name for 10x the time the fetch took (12 s)
    fetch = Fetcher({"a": False, "b": False})
    assert listings.names("/d", fetch) is None and fetch.calls == 0
    listings.added("/d", "c")  # not kept meanwhile: the next fetch lists it
    clock.now += 2.5
    assert listings.names("/d", fetch) == {"a": False, "b": False} and fetch.calls == 1


def test_one_fetch_for_many_threads_on_an_expired_listing(clock: Clock) -> None:
    """Threads: the lookups that find the listing expired while it is being fetched wait
    for that fetch and answer from it."""
    listings = Listings(ttl=1.0)
    listings.made("/d")
    clock.now += 1.5
    release = threading.Event()
    calls = 0

    def fetch(directory: str, max_entries: int) -> dict[str, bool]:
        nonlocal calls
        calls += 1
        assert release.wait(10)
        return {"a": False}

    with ThreadPoolExecutor(8) as pool:
        answers = [pool.submit(listings.names, "/d", fetch) for _ in range(8)]
        deadline = time.perf_counter() + 10
        while calls == 0 and time.perf_counter() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)  # the others reach the wait
        release.set()
        assert [a.result(10) for a in answers] == [{"a": False}] * 8
    assert calls == 1


def test_forget_tree_and_no_ttl(clock: Clock) -> None:
    listings = Listings(ttl=1.0)
    for d in ("/a", "/a/b", "/ab"):
        listings.made(d)
    listings.forget_tree("/a")
    assert listings.names("/a") is None and listings.names("/a/b") is None
    assert listings.names("/ab") == {}
    uncached = Listings(ttl=0)
    uncached.made("/a")
    assert uncached.names("/a", Fetcher()) is None
