"""KernelView: when a lookup or an open must answer ESTALE so that the kernel replaces a
stale inode, and when an open may keep the kernel's cached pages. No mount needed."""

from __future__ import annotations

import time

from gateway.fuse_mount.kernel_view import KernelView
from gateway.fuse_mount.shared_upload import Ranges


def test_lookup_of_a_changed_file_is_estale_once_after_the_entry_expired() -> None:
    view = KernelView(0.05, writeback=True)
    assert view.answer("/f", 10, "e1")
    assert view.answer("/f", 30, "e2")  # within the entry timeout: maybe a getattr
    time.sleep(0.06)
    assert not view.answer("/f", 30, "e2")  # a lookup: the kernel drops its inode
    assert view.answer("/f", 30, "e2")  # the lookup that follows makes the new one
    time.sleep(0.06)
    assert view.answer("/f", 30, "e2")


def test_open_of_a_changed_file_forces_one_more_estale_lookup() -> None:
    view = KernelView(10.0, writeback=True)
    assert view.answer("/f", 10, "e1")
    assert not view.stale_at_open("/f", 10, "e1")
    assert view.stale_at_open("/f", 12, "e2")
    assert not view.answer("/f", 12, "e2")  # forced, although the entry is fresh
    assert view.answer("/f", 12, "e2")
    assert not view.stale_at_open("/f", 12, "e2")


def test_without_the_writeback_cache_nothing_is_estale() -> None:
    view = KernelView(0.0, writeback=False)
    assert view.answer("/f", 10, "e1")
    assert view.answer("/f", 11, "e2")
    assert not view.stale_at_open("/f", 12, "e3")


def test_pages_are_kept_only_for_the_same_etag() -> None:
    view = KernelView(1.0, writeback=True)
    assert not view.keep_cache("/f", "e1")
    view.opened("/f", "e1")
    assert view.keep_cache("/f", "e1") and not view.keep_cache("/f", "e2")
    view.committed("/f", 5, "e3")  # written here: the pages are that content
    assert view.keep_cache("/f", "e3")
    view.renamed("/f", "/g")
    assert view.keep_cache("/g", "e3") and not view.keep_cache("/f", "e3")
    view.removed("/g")
    assert not view.keep_cache("/g", "e3")


def test_ranges_merge_and_clip() -> None:
    ranges = Ranges()
    for start, end in ((10, 20), (30, 40), (20, 25), (0, 5)):
        ranges.add(start, end)
    assert ranges.within(0, 100) == [(0, 5), (10, 25), (30, 40)]
    assert ranges.within(12, 35) == [(12, 25), (30, 35)]
    assert ranges.end == 40
