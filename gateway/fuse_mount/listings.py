"""Complete listings of the directories this mount made, kept for a short TTL: lookups of
names that do not exist (every create starts with one) are answered without a request.

Only directories created here (mkdir) are tracked: filling a new directory is where
creates come in storms (tar, cp -r, rsync, checkpoints), and a name another client creates
in such a directory less than one TTL after it was made or last listed is the only one
that can be missed for that long (the same ``--attr-timeout`` as attributes). The mount's
own creates, unlinks and renames keep a listing up to date, also while it is being fetched
(they are applied to the fetched entries). An expired listing is fetched again, all its
pages, by the first lookup that needs it; lookups in the same directory meanwhile wait for
that fetch rather than answer from the stale listing (which could miss another client's
name for longer than one TTL). A listing is fresh for one TTL from the moment its fetch
started. A directory of more than ``max_entries`` entries (100,000 by default) is no
longer kept: lookups there go name by name until a complete listing of it (``ls``) fits
again. A listing whose fetch took longer than the TTL arrives expired and is not kept
either: lookups there go name by name for ten times as long as that fetch took, then the
listing is fetched again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)
DEFAULT_MAX_ENTRIES = 100_000
SLOW_FETCH_REST = 10  # after a fetch slower than the TTL: name by name for 10x its time
MAX_WAIT = 10.0  # seconds a lookup waits for another thread's fetch, at most
MAX_DIRECTORIES = 10_000

#: fetch(directory, max_entries): its complete entries (name -> is a directory), or None
#: when it has more than ``max_entries``.
Fetch = Callable[[str, int], dict[str, bool] | None]


@dataclass(slots=True, eq=False)
class Pending:
    """A listing being fetched: this mount's changes to the directory meanwhile."""

    directory: str
    started: float
    #: (name, is a directory) added, or (name, None) removed, in order.
    changes: list[tuple[str, bool | None]] = field(default_factory=list)


@dataclass(slots=True)
class _Listing:
    listed_at: float  # when the fetch of ``names`` started (or the directory was made)
    #: name -> is a directory; None: too large or too slow to keep (looked up name by name).
    names: dict[str, bool] | None
    retry_at: float | None = None  # names None after a slow fetch: fetched again from then
    fetching: bool = False  # a lookup is fetching it again (the others wait)
    pending: list[Pending] = field(default_factory=list)


class Listings:
    """directory path -> its entries, fresh for ``ttl`` seconds; thread-safe."""

    def __init__(self, ttl: float, *, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self._ttl = ttl
        self._max_entries = max_entries
        self._lock = threading.Lock()
        self._fetched = threading.Condition(self._lock)
        self._dirs: dict[str, _Listing] = {}

    def names(self, directory: str, fetch: Fetch | None = None, *,
              name: str | None = None) -> dict[str, bool] | None:
        """The fresh, complete entries of ``directory`` (name -> is a directory), or None
        (not tracked, not kept, or expired and no ``fetch`` given).

        An expired listing is fetched again with ``fetch`` by one thread (its errors are
        raised to that thread); the others wait for it (at most twice the TTL or
        ``MAX_WAIT``, then None: looked up name by name).
        An expired listing that holds ``name`` as a file is returned as it is: the caller
        asks the store about an existing file anyway."""
        deadline: float | None = None
        with self._lock:
            while True:
                entry = self._dirs.get(directory)
                if entry is None:
                    return None
                now = time.monotonic()
                if entry.names is not None:
                    if (entry.listed_at + self._ttl >= now
                            or (name is not None and entry.names.get(name) is False)):
                        return entry.names
                elif entry.retry_at is None or now < entry.retry_at:
                    return None
                if fetch is None:
                    return None
                if not entry.fetching:
                    break
                if deadline is None:
                    deadline = now + min(2 * self._ttl, MAX_WAIT)
                if now >= deadline:
                    return None  # answered name by name: consistent, only dearer
                self._fetched.wait(deadline - now)
            entry.fetching = True
            pending = self._begin(directory, entry)
        try:
            fetched = fetch(directory, self._max_entries)
        except BaseException:
            with self._lock:
                entry.fetching = False
                self._end(entry, pending)
                self._fetched.notify_all()
            raise
        elapsed = time.monotonic() - pending.started
        log.debug("listing of %s fetched again: %s entries in %.3f s", directory,
                  "too many" if fetched is None else len(fetched), elapsed)
        retry_at = None
        if fetched is not None and elapsed > self._ttl:
            # Expired on arrival: every lookup would wait for a fetch.
            fetched, retry_at = None, time.monotonic() + SLOW_FETCH_REST * elapsed
        with self._lock:
            entry.fetching = False
            names = self._finish(pending, fetched, retry_at)
            self._fetched.notify_all()
            return names

    def made(self, directory: str) -> None:
        """This mount created ``directory``: it is empty, and tracked from now on."""
        if self._ttl <= 0:
            return
        with self._lock:
            if len(self._dirs) >= MAX_DIRECTORIES:
                self._dirs.clear()
            self._dirs[directory] = _Listing(time.monotonic(), {})

    def begin(self, directory: str) -> Pending | None:
        """A complete listing of ``directory`` starts now (None: it is not tracked). The
        caller ends it with :meth:`finish` or :meth:`abort`."""
        with self._lock:
            entry = self._dirs.get(directory)
            return None if entry is None else self._begin(directory, entry)

    def finish(self, pending: Pending | None, names: dict[str, bool] | None) -> None:
        """The listing ``pending`` is complete: ``names`` (None: more than the bound), kept
        with this mount's changes made since it started, unless a newer one is known."""
        if pending is not None:
            with self._lock:
                self._finish(pending, names)

    def abort(self, pending: Pending | None) -> None:
        """The listing ``pending`` was not completed."""
        if pending is not None:
            with self._lock:
                entry = self._dirs.get(pending.directory)
                if entry is not None:
                    self._end(entry, pending)

    def added(self, directory: str, name: str, *, is_dir: bool = False) -> None:
        """This mount created ``name`` in ``directory`` (a file hides a directory)."""
        with self._lock:
            entry = self._dirs.get(directory)
            if entry is None:
                return
            for pending in entry.pending:
                pending.changes.append((name, is_dir))
            if entry.names is not None:
                _add(entry.names, name, is_dir)
                if len(entry.names) > self._max_entries:
                    entry.names = None

    def removed(self, directory: str, name: str) -> None:
        """This mount removed ``name`` from ``directory``."""
        with self._lock:
            entry = self._dirs.get(directory)
            if entry is None:
                return
            for pending in entry.pending:
                pending.changes.append((name, None))
            if entry.names is not None:
                entry.names.pop(name, None)

    def forget_tree(self, path: str) -> None:
        """Listings of ``path`` and of every directory under it are no longer known."""
        prefix = path.rstrip("/") + "/"
        with self._lock:
            for d in [d for d in self._dirs if d == path or d.startswith(prefix)]:
                del self._dirs[d]

    # -- under the lock ---------------------------------------------------------------------
    def _begin(self, directory: str, entry: _Listing) -> Pending:
        pending = Pending(directory, time.monotonic())
        entry.pending.append(pending)
        return pending

    @staticmethod
    def _end(entry: _Listing, pending: Pending) -> None:
        if pending in entry.pending:
            entry.pending.remove(pending)

    def _finish(self, pending: Pending, names: dict[str, bool] | None,
                retry_at: float | None = None) -> dict[str, bool] | None:
        entry = self._dirs.get(pending.directory)
        if entry is None or pending not in entry.pending:
            return None  # forgotten or made again meanwhile: this listing is of the past
        self._end(entry, pending)
        if pending.started < entry.listed_at:  # a listing started later is kept already
            fresh = entry.listed_at + self._ttl >= time.monotonic()
            return entry.names if fresh else None
        if names is not None:
            for name, is_dir in pending.changes:
                if is_dir is None:
                    names.pop(name, None)
                else:
                    _add(names, name, is_dir)
            if len(names) > self._max_entries:
                names = None
        entry.names, entry.listed_at, entry.retry_at = names, pending.started, retry_at
        return names


def _add(names: dict[str, bool], name: str, is_dir: bool) -> None:
    if is_dir:
        names.setdefault(name, True)
    else:
        names[name] = False
