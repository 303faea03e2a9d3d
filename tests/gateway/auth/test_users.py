"""gateway/auth/users.py: the users file and the in-memory directory."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gateway.auth.credentials import Credentials
from gateway.auth.users import (
    NoSuchUser,
    UserDirectory,
    UserError,
    UserExists,
    UserFile,
    UserLimits,
    admin_user,
    check_secret,
    new_user,
)

ADMIN = admin_user(Credentials("ADMINKEY", "admin-secret-0123456789"))


def directory(tmp_path: Path) -> UserDirectory:
    return UserDirectory(ADMIN, UserFile(tmp_path / "d" / "users.json"))


def test_the_admin_has_a_stable_64_hex_canonical_id() -> None:
    again = admin_user(Credentials("ADMINKEY", "another-secret-0123456789"))
    assert ADMIN.canonical_id == again.canonical_id and len(ADMIN.canonical_id) == 64
    assert ADMIN.admin and ADMIN.name == "admin"
    assert "admin-secret" not in repr(ADMIN)


def test_added_users_are_kept_private_and_found_by_access_key(tmp_path: Path) -> None:
    users = directory(tmp_path)
    alice = users.add(new_user("alice"))
    path = tmp_path / "d" / "users.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert users.secret_for(alice.access_key) == alice.secret_key
    assert users.user_for(alice.access_key) == alice
    assert users.secret_for(ADMIN.access_key) == ADMIN.secret_key
    assert [u.name for u in users.users()] == ["admin", "alice"]
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    assert directory(tmp_path).user_for(alice.access_key) == alice  # read back


def test_changes_take_effect_at_once_and_other_processes_reload(tmp_path: Path) -> None:
    mine, theirs = directory(tmp_path), directory(tmp_path)
    bob = mine.add(new_user("bob"))
    assert theirs.user_for(bob.access_key) == bob  # an unknown key: the file is checked
    assert not theirs.reload()  # unchanged file: nothing read
    mine.remove("bob")
    assert mine.secret_for(bob.access_key) is None
    assert theirs.reload() and theirs.secret_for(bob.access_key) is None


def test_refused_changes(tmp_path: Path) -> None:
    users = directory(tmp_path)
    users.add(new_user("carol"))
    with pytest.raises(UserExists):
        users.add(new_user("carol"))
    with pytest.raises(UserExists):
        users.add(new_user("dave", access_key=ADMIN.access_key))
    with pytest.raises(NoSuchUser):
        users.remove("nobody")
    with pytest.raises(UserError, match="cannot be removed"):
        users.remove("admin")
    for name in ("", "a b", "x" * 65, "admin"):
        with pytest.raises(UserError):
            new_user(name)
    with pytest.raises(ValueError, match="at least 16 characters"):
        new_user("erin", secret_key="short")
    assert check_secret("s" * 16) == "s" * 16


def test_a_damaged_file_is_refused_at_start_and_kept_around_later(tmp_path: Path) -> None:
    users = directory(tmp_path)
    frank = users.add(new_user("frank"))
    path = tmp_path / "d" / "users.json"
    path.write_text("{not json")
    os.utime(path, ns=(1, 1))
    with pytest.raises(ValueError, match="damaged"):
        users.reload()
    assert users.user_for(frank.access_key) == frank  # the users known so far still work
    with pytest.raises(ValueError, match="damaged"):
        directory(tmp_path)


def test_a_users_own_limits_are_kept_and_cleared(tmp_path: Path) -> None:
    file = UserFile(tmp_path / "users.json")
    file.add(new_user("dana"))
    file.set_limits("dana", UserLimits(max_requests=4, max_bandwidth=1e6))
    (dana,) = file.read()
    assert dana.limits == UserLimits(max_requests=4, max_bandwidth=1e6)
    assert dana.public()["limits"] == {"max_requests": 4, "max_bandwidth": 1e6}
    file.set_limits("dana", UserLimits())  # none given: the gateway's settings
    assert file.read()[0].limits is None
    with pytest.raises(UserError):
        file.set_limits("nobody", UserLimits(max_rate=1))
    for bad in ({"max_rate": -1}, {"max_requests": 1.5}, {"max_bandwidth": True}):
        with pytest.raises(UserError):
            UserLimits(**bad)  # type: ignore[arg-type]
