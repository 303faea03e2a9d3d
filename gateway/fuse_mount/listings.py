"""Complete listings of the directories this mount made, kept for a short TTL: lookups of
names that do not exist (every create starts with one) are answered without a request.

Only directories created here (mkdir) are tracked: filling a new directory is where
creates come in storms (tar, cp -r, rsync, checkpoints), and a name another client creates
in such a directory less than one TTL after it was made or last listed is the only one
that can be missed for that long (the same ``--attr-timeout`` as attributes). The mount's
own creates, unlinks and renames keep a listing up to date; an expired listing is fetched
again (one ListObjectsV2 page) when a lookup needs it, and a directory that outgrows one
page is looked up name by name.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass


@dataclass(slots=True)
class _Listing:
    expires: float
    #: name -> is a directory; None: more entries than one page (not listed on demand).
    names: dict[str, bool] | None


class Listings:
    """directory path -> its entries, fresh for ``ttl`` seconds; thread-safe."""

    def __init__(self, ttl: float) -> None:
        self._ttl = ttl
        self._lock = threading.Lock()
        self._dirs: dict[str, _Listing] = {}

    def names(self, directory: str) -> dict[str, bool] | None:
        """The fresh, complete entries of ``directory`` (name -> is a directory), or None."""
        with self._lock:
            entry = self._dirs.get(directory)
            if entry is None or entry.names is None or entry.expires < time.monotonic():
                return None
            return entry.names

    def wanted(self, directory: str) -> bool:
        """Should ``directory`` be listed (one page) to answer a lookup in it? Yes when it
        is tracked and its listing expired."""
        with self._lock:
            entry = self._dirs.get(directory)
            return (entry is not None and entry.names is not None
                    and entry.expires < time.monotonic())

    def made(self, directory: str) -> None:
        """This mount created ``directory``: it is empty, and tracked from now on."""
        self._store(directory, {})

    def refresh(self, directory: str, names: dict[str, bool] | None) -> None:
        """The complete entries of ``directory`` as listed now (None: more than one page),
        kept if the directory is tracked."""
        with self._lock:
            if directory not in self._dirs:
                return
        self._store(directory, names)

    def _store(self, directory: str, names: dict[str, bool] | None) -> None:
        if self._ttl <= 0:
            return
        with self._lock:
            if len(self._dirs) > 10_000:
                self._dirs.clear()
            self._dirs[directory] = _Listing(time.monotonic() + self._ttl, names)

    def added(self, directory: str, name: str, *, is_dir: bool = False) -> None:
        """This mount created ``name`` in ``directory`` (a file hides a directory)."""
        with self._lock:
            entry = self._dirs.get(directory)
            if entry is not None and entry.names is not None:
                if is_dir:
                    entry.names.setdefault(name, True)
                else:
                    entry.names[name] = False

    def removed(self, directory: str, name: str) -> None:
        """This mount removed ``name`` from ``directory``."""
        with self._lock:
            entry = self._dirs.get(directory)
            if entry is not None and entry.names is not None:
                entry.names.pop(name, None)

    def forget_tree(self, path: str) -> None:
        """Listings of ``path`` and of every directory under it are no longer known."""
        prefix = path.rstrip("/") + "/"
        with self._lock:
            for d in [d for d in self._dirs if d == path or d.startswith(prefix)]:
                del self._dirs[d]
