"""The data directory's layout by worker count, and the checks when that count changes.

One process (``--workers 1``) keeps its cache index in ``<data-dir>/index``; worker ``k``
of ``--workers N`` keeps its own in ``<data-dir>/worker-<k>/index``, and owns the keys
the ring of N workers gives it. ``<data-dir>/workers.json`` records N (absent: one
process). Started with another N, a gateway would look for unflushed records in the
wrong index (or with the wrong owners), so the change is allowed only when every index
of the old layout is clean; the old indexes are then removed (their clean records would
be stale copies after a later change back). Otherwise start is refused: run the gateway
with the old N, ``squall sync``, stop it, then change N. See docs/workers.md.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from backends.core.errors import ServiceUnavailable
from gateway.cache.index import Index

log = logging.getLogger("squall.workers")

MARKER = "workers.json"
MARKER_FORMAT = "squall-workers"
MARKER_VERSION = 1
INDEX_DIR = "index"  # under the data dir of one process (gateway/components.py)
SINGLE_CACHE_DIR = "cache"  # the default cache volume of one process


class LayoutError(ValueError):
    """The data directory cannot be used with this worker count (message for users)."""


def worker_dir(data_dir: Path, index: int) -> Path:
    return data_dir / f"worker-{index}"


def recorded_workers(data_dir: Path) -> int | None:
    """The worker count the data directory was last used with; None: not recorded
    (a fresh directory, or one used by one process)."""
    path = data_dir / MARKER
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise LayoutError(f"{path} is unreadable ({exc}); it records the worker count "
                          "this data directory was used with") from exc
    if (not isinstance(doc, dict) or doc.get("format") != MARKER_FORMAT
            or doc.get("version") != MARKER_VERSION or not isinstance(doc.get("workers"), int)):
        raise LayoutError(f"{path} has an unknown format: {doc!r}")
    return int(doc["workers"])


def _indexes(data_dir: Path) -> dict[str, Path]:
    """Every cache index in the data directory, by owner ("one process", "worker-K")."""
    found = {}
    if (data_dir / INDEX_DIR).is_dir():
        found["one process"] = data_dir / INDEX_DIR
    for path in sorted(data_dir.glob("worker-*")):
        if path.name.removeprefix("worker-").isdigit() and (path / INDEX_DIR).is_dir():
            found[path.name] = path / INDEX_DIR
    return found


def unflushed(index_path: Path) -> tuple[int, int]:
    """(unflushed records, multipart uploads) in a cache index not in use."""
    try:
        index = Index(index_path)
    except ServiceUnavailable as exc:
        raise LayoutError(f"cannot open the cache index {index_path} ({exc}); is a gateway "
                          "running on this data directory?") from exc
    try:
        contents = index.load()
    finally:
        index.close()
    return sum(1 for e in contents.entries if e.dirty), len(contents.uploads)


def prepare(data_dir: Path, workers: int, *, keep: Iterable[Path] = ()) -> None:
    """Make ``data_dir`` ready for ``workers`` processes, or raise LayoutError.

    Nothing happens when the count is unchanged (the usual start). ``keep``: directories
    in use by the new layout (cache volumes), never removed.
    """
    indexes = _indexes(data_dir)
    previous = _previous(data_dir, indexes)
    if previous == workers:
        return
    if not indexes:
        _record(data_dir, workers)
        return
    held = _held(indexes)
    if held:
        was = f"--workers {previous}" if previous is not None else "another --workers"
        detail = "; ".join(f"{owner}: {r} unflushed records, {u} multipart uploads"
                           for owner, (r, u) in held.items())
        raise LayoutError(
            f"data directory {data_dir} was last served with {was} and still holds "
            f"writes not on the backend ({detail}). Start it with {was}, run `squall "
            f"sync`, stop it, then start it with --workers {workers}.")
    kept = [p.resolve() for p in keep]
    for owner, path in indexes.items():
        shutil.rmtree(path)
        if owner == "one process":
            if workers > 1:
                _remove(data_dir / SINGLE_CACHE_DIR, kept)
        elif workers == 1 or int(owner.removeprefix("worker-")) >= workers:
            _remove(path.parent, kept)
    log.warning("data directory %s: worker count changed from %s to %d; the old caches "
                "were clean and have been removed", data_dir, previous or "unknown", workers)
    _record(data_dir, workers)


def count_for_auto(data_dir: Path, wanted: int) -> int:
    """The worker count ``--workers auto`` starts with: ``wanted``, unless the data
    directory was last served with another count and still holds writes not on the
    backend (auto then keeps that count rather than refuse to start)."""
    if not data_dir.is_dir():  # new, or a bad path the start's checks report
        return wanted
    indexes = _indexes(data_dir)
    previous = _previous(data_dir, indexes)
    if previous is None or previous == wanted or not indexes or not _held(indexes):
        return wanted
    log.warning("data directory %s was last served with --workers %d and holds writes "
                "not on the backend: --workers auto keeps %d workers (instead of %d) "
                "until they are flushed and the gateway restarted", data_dir, previous,
                previous, wanted)
    return previous


def _previous(data_dir: Path, indexes: dict[str, Path]) -> int | None:
    """The worker count of the layout in place (None: workers of an unknown count)."""
    recorded = recorded_workers(data_dir)
    if recorded is not None:
        return recorded
    return None if any(k.startswith("worker-") for k in indexes) else 1


def _held(indexes: dict[str, Path]) -> dict[str, tuple[int, int]]:
    """Owner -> (unflushed records, multipart uploads), for the indexes holding any."""
    held = {}
    for owner, path in indexes.items():
        records, uploads = unflushed(path)
        if records or uploads:
            held[owner] = (records, uploads)
    return held


def _remove(path: Path, keep: list[Path]) -> None:
    resolved = path.resolve()
    if not path.exists() or any(k == resolved or resolved in k.parents for k in keep):
        return
    shutil.rmtree(path)


def _record(data_dir: Path, workers: int) -> None:
    path = data_dir / MARKER
    if workers == 1:
        path.unlink(missing_ok=True)
        return
    data_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        json.dump({"format": MARKER_FORMAT, "version": MARKER_VERSION, "workers": workers}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
