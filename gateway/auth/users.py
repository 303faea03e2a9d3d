"""Users: named key pairs with S3-style canonical ids.

The admin is the gateway's own key pair (settings or ``credentials.json``); every other
user is kept in ``<data dir>/users.json`` (mode 0600, replaced atomically, changed under
an advisory lock so that workers and ``squall user`` do not lose each other's changes).
A process serves from a :class:`UserDirectory`, an in-memory map by access key that it
re-reads when the file changes (docs/security.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import secrets
import string
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gateway.auth.credentials import Credentials, write_private
from gateway.background import PeriodicTask

USERS_FILE = "users.json"
ADMIN_NAME = "admin"
MIN_SECRET_LENGTH = 16  # S3's secret keys have 40 characters
RELOAD_INTERVAL_S = 0.5
_NAME = re.compile(r"[A-Za-z0-9+=,.@_-]{1,64}")  # IAM user names
_KEY_ALPHABET = string.ascii_uppercase + string.digits
_FORMAT = 1


@dataclass(frozen=True, slots=True)
class UserLimits:
    """One user's own fair-share limits (docs/security.md, "Fair shares"); ``None``
    takes the gateway's setting, ``0`` turns that limit off for the user."""

    max_requests: int | None = None
    max_rate: float | None = None
    max_bandwidth: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_requests", "max_rate", "max_bandwidth"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(
                    value, (int, float)) or not 0 <= value < float("inf")):
                raise UserError(f"{name} must be a number >= 0, not {value!r}")
        if self.max_requests is not None and self.max_requests != int(self.max_requests):
            raise UserError(f"max_requests must be a whole number, not {self.max_requests!r}")

    @property
    def empty(self) -> bool:
        return self.max_requests is None and self.max_rate is None \
            and self.max_bandwidth is None

    def public(self) -> dict[str, float | int]:
        """The limits that are set."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_doc(cls, doc: object) -> UserLimits:
        """From the ``limits`` object of ``users.json`` or the API (UserError if bad)."""
        if not isinstance(doc, dict) or set(doc) - {"max_requests", "max_rate",
                                                    "max_bandwidth"}:
            raise UserError(f"limits must be an object of max_requests, max_rate, "
                            f"max_bandwidth, not {doc!r}")
        return cls(**doc)


class UserError(ValueError):
    """A refused change (bad name, name or key taken, no such user); one-line message."""


class UserExists(UserError):
    """The name or access key is taken."""


class NoSuchUser(UserError):
    """No user has that name."""


@dataclass(frozen=True, slots=True)
class User:
    """Who signs a request: ``canonical_id`` (64 hex digits) is what owners and grants
    name; ``admin`` may manage users."""

    name: str
    access_key: str
    secret_key: str = field(repr=False)
    canonical_id: str
    admin: bool = False
    limits: UserLimits | None = None  # the user's own fair-share limits, if any

    def public(self) -> dict[str, Any]:
        """Everything but the secret."""
        doc: dict[str, Any] = {"name": self.name, "access_key": self.access_key,
                               "canonical_id": self.canonical_id, "admin": self.admin}
        if self.limits is not None:
            doc["limits"] = self.limits.public()
        return doc


def check_secret(secret: str, what: str = "the secret key") -> str:
    """``secret``, or ValueError when it is too short to be a secret."""
    if len(secret) < MIN_SECRET_LENGTH:
        raise ValueError(f"{what} must have at least {MIN_SECRET_LENGTH} characters "
                         f"(S3's secret keys have 40), not {len(secret)}")
    return secret


def admin_user(credentials: Credentials) -> User:
    """The admin: the gateway's key pair, with a canonical id derived from its access
    key (the same on every member and after every restart)."""
    digest = hashlib.sha256(b"squall-admin\0" + credentials.access_key.encode()).hexdigest()
    return User(ADMIN_NAME, credentials.access_key, credentials.secret_key, digest, admin=True)


def new_user(name: str, access_key: str | None = None, secret_key: str | None = None) -> User:
    """A user with a fresh canonical id and, unless given, a fresh key pair."""
    if not _NAME.fullmatch(name):
        raise UserError(f"invalid user name {name!r}: 1 to 64 letters, digits or +=,.@_-")
    if name == ADMIN_NAME:
        raise UserError(f"{ADMIN_NAME!r} is the gateway's own key pair")
    return User(
        name=name,
        access_key=access_key or "SQ" + "".join(secrets.choice(_KEY_ALPHABET)
                                               for _ in range(18)),
        secret_key=check_secret(secret_key) if secret_key else secrets.token_urlsafe(30),
        canonical_id=secrets.token_hex(32))


class UserFile:
    """``users.json``: read it, change it under a lock, know when it changed."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> list[User]:
        """The stored users; none when there is no file. ValueError if damaged."""
        try:
            doc = json.loads(self.path.read_bytes())
            return [_user_of(row) for row in doc["users"]]
        except FileNotFoundError:
            return []
        except PermissionError as exc:
            raise ValueError(f"cannot read {self.path}: permission denied") from exc
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{self.path} is damaged") from exc

    def stamp(self) -> tuple[int, int, int] | None:
        """Changes whenever the file is replaced (inode, size, mtime); None: no file."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def add(self, user: User, *, reserved: frozenset[str] = frozenset()) -> User:
        """Store ``user``; UserError if its name or access key is taken (``reserved``:
        access keys kept by others, the admin's)."""
        with self._locked():
            users = self.read()
            if any(u.name == user.name for u in users):
                raise UserExists(f"user {user.name!r} exists")
            if user.access_key in reserved or any(u.access_key == user.access_key
                                                  for u in users):
                raise UserExists(f"access key {user.access_key} is taken")
            self._write([*users, user])
        return user

    def remove(self, name: str) -> User:
        """Delete the user ``name``; UserError if there is none."""
        with self._locked():
            users = self.read()
            gone = next((u for u in users if u.name == name), None)
            if gone is None:
                raise NoSuchUser(f"no user {name!r}")
            self._write([u for u in users if u.name != name])
        return gone

    def set_limits(self, name: str, limits: UserLimits | None) -> User:
        """Give user ``name`` its own limits (None: the gateway's); UserError if there is
        no such user."""
        with self._locked():
            users = self.read()
            found = next((u for u in users if u.name == name), None)
            if found is None:
                raise NoSuchUser(f"no user {name!r}")
            changed = dataclasses.replace(
                found, limits=None if limits is None or limits.empty else limits)
            self._write([changed if u.name == name else u for u in users])
        return changed

    def _write(self, users: list[User]) -> None:
        rows = [_row_of(u) for u in users]
        write_private(self.path, json.dumps({"format": _FORMAT, "users": rows},
                                            indent=1).encode())

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path.with_name(self.path.name + ".lock"),
                     os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def _user_of(row: dict[str, Any]) -> User:
    limits = row.pop("limits", None)
    return User(**row, admin=False,
                limits=None if limits is None else UserLimits.from_doc(limits))


def _row_of(user: User) -> dict[str, Any]:
    row: dict[str, Any] = {"name": user.name, "access_key": user.access_key,
                           "secret_key": user.secret_key, "canonical_id": user.canonical_id}
    if user.limits is not None:
        row["limits"] = user.limits.public()
    return row


class UserDirectory:
    """The users a process authenticates: one dict lookup per request; re-read from the
    file when it changes (:meth:`watch`), at once after a change made here."""

    def __init__(self, admin: User, file: UserFile) -> None:
        self.admin = admin
        self.file = file
        self._stamp: tuple[int, int, int] | None = None
        self._by_key: dict[str, User] = {admin.access_key: admin}
        self.reload()

    def secret_for(self, access_key: str) -> str | None:
        user = self.user_for(access_key)
        return user.secret_key if user is not None else None

    def user_for(self, access_key: str) -> User | None:
        """The user of ``access_key``. An unknown key makes the file be checked at once
        (one stat): a user just added by another worker is known from its first request."""
        user = self._by_key.get(access_key)
        if user is None:
            with contextlib.suppress(ValueError, OSError):
                if self.reload():
                    user = self._by_key.get(access_key)
        return user

    def users(self) -> list[User]:
        """The admin, then the stored users by name."""
        return [self.admin, *sorted((u for u in self._by_key.values() if not u.admin),
                                    key=lambda u: u.name)]

    def add(self, user: User) -> User:
        self.file.add(user, reserved=frozenset({self.admin.access_key}))
        self.reload()
        return user

    def set_limits(self, name: str, limits: UserLimits | None) -> User:
        if name == ADMIN_NAME:
            raise UserError(f"{ADMIN_NAME!r} takes the gateway's settings (user_max_*)")
        changed = self.file.set_limits(name, limits)
        self.reload()
        return changed

    def remove(self, name: str) -> User:
        if name == ADMIN_NAME:
            raise UserError(f"{ADMIN_NAME!r} is the gateway's own key pair; it cannot be "
                            "removed")
        gone = self.file.remove(name)
        self.reload()
        return gone

    def reload(self) -> bool:
        """Re-read the file if it changed; whether it did. A damaged file keeps the
        users known so far (ValueError is raised only on the first read)."""
        stamp = self.file.stamp()
        if stamp == self._stamp:
            return False
        users = self.file.read()
        by_key = {u.access_key: u for u in users if u.access_key != self.admin.access_key}
        by_key[self.admin.access_key] = self.admin
        self._by_key, self._stamp = by_key, stamp
        return True

    def watcher(self, interval_s: float = RELOAD_INTERVAL_S) -> PeriodicTask:
        """A task re-reading the file every ``interval_s`` when it changed (other workers,
        the offline command, a copy from another member), from its start to its stop."""
        return PeriodicTask(self._reload_quietly, every=interval_s, wait_first=True,
                            name="users-watch")

    async def _reload_quietly(self) -> None:
        with contextlib.suppress(ValueError, OSError):
            await asyncio.to_thread(self.reload)
