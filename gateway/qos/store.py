"""Classes set through the admin API, kept in ``qos.json`` in the data directory.

Format (docs/qos.md)::

    {"magic": "squall.qos", "v": 1, "buckets": {"NAME": {class} | null}}

``null`` records a ``clear`` of a class the config file gives. The file is written to a
temporary name, fsynced and renamed; every process serving the data directory (the
workers of one gateway) re-reads it when its modification time changes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gateway.qos.model import QosClass

MAGIC = "squall.qos"
FORMAT = 1
FILE_NAME = "qos.json"

Overrides = dict[str, QosClass | None]


class QosStoreError(ValueError):
    """The file is damaged or in a format this version does not know."""


class QosStore:
    """Reads and writes the API-set classes (blocking: call from a worker thread)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def stamp(self) -> float | None:
        """The file's modification time (None: no file): cheap change detection."""
        try:
            return self.path.stat().st_mtime_ns / 1e9
        except FileNotFoundError:
            return None

    def load(self) -> Overrides:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise QosStoreError(f"{self.path} is damaged (not JSON)") from exc
        if not isinstance(data, dict) or data.get("magic") != MAGIC:
            raise QosStoreError(f"{self.path} is not a Squall QoS file")
        if data.get("v") != FORMAT:
            raise QosStoreError(f"{self.path} has format {data.get('v')!r}; this Squall "
                                f"knows format {FORMAT} only")
        buckets = data.get("buckets")
        if not isinstance(buckets, dict):
            raise QosStoreError(f"{self.path} is damaged (no buckets)")
        try:
            return {name: None if doc is None else QosClass.model_validate(doc)
                    for name, doc in buckets.items()}
        except ValidationError as exc:
            raise QosStoreError(f"{self.path} holds an invalid class: {exc}") from exc

    def save(self, overrides: Overrides) -> None:
        doc: dict[str, Any] = {"magic": MAGIC, "v": FORMAT, "buckets": {
            name: None if cls is None else cls.model_dump() for name, cls in
            sorted(overrides.items())}}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("w") as f:
            json.dump(doc, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.path)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def store_path(data_dir: Path, workers: int) -> Path:
    """``qos.json`` of the gateway: a worker's data directory is ``<data-dir>/worker-<k>``,
    so the workers of one gateway share the file in the parent directory."""
    return (data_dir.parent if workers > 1 else data_dir) / FILE_NAME
