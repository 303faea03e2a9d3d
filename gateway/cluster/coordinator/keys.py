"""What Squall keeps in etcd, under the prefix (``/squall/`` by default).

=====================  =========  ========================================================
key                    lease      value
=====================  =========  ========================================================
``members/<id>``       member's   the member's record (JSON, :class:`Registration`): it is
                                  in the ring while its lease lives
``held/<id>``          none       the same record: the member may hold the only copy of
                                  acknowledged writes, so it stays in the ring (its keys
                                  wait for it) even without a lease
``synced/<id>``        none       the newest revision of the ring the member has finished
                                  handing keys over for (decimal)
=====================  =========  ========================================================

``<id>`` is :func:`gateway.cluster.view.member_id` of the member's name. Records carry
a format number; a member refuses one it does not know (a newer Squall).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from gateway.cluster.view import Member, member_id

FORMAT = 1
MEMBERS = "members/"
HELD = "held/"
SYNCED = "synced/"


@dataclass(frozen=True, slots=True)
class Registration:
    """A member's record: where it is reached and what it runs."""

    host: str  # its URL (--advertise-url, or http:// + --listen)
    worker: int
    workers: int
    started: float  # wall clock, for people reading the cluster view
    format: int = FORMAT

    @property
    def member(self) -> Member:
        return Member.of(self.host, self.worker, self.workers)

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> Registration:
        """ValueError for a record this version does not read."""
        raw = json.loads(data)
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise ValueError(f"unknown member record format: {data[:100]!r}")
        return cls(str(raw["host"]), int(raw["worker"]), int(raw["workers"]),
                   float(raw["started"]))


class Layout:
    """The keys of one cluster (``prefix``)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix.encode()

    def member(self, name: str) -> bytes:
        return self.prefix + (MEMBERS + member_id(name)).encode()

    def held(self, name: str) -> bytes:
        return self.prefix + (HELD + member_id(name)).encode()

    def synced(self, name: str) -> bytes:
        return self.prefix + (SYNCED + member_id(name)).encode()

    def kind(self, key: bytes) -> tuple[str, str] | None:
        """(``members/`` | ``held/`` | ``synced/``, id) of one of our keys, else None."""
        if not key.startswith(self.prefix):
            return None
        rest = key[len(self.prefix):].decode("utf-8", "replace")
        for kind in (MEMBERS, HELD, SYNCED):
            if rest.startswith(kind):
                return kind, rest[len(kind):]
        return None
