"""Every admin route checks its caller before its parameters (docs/security.md, "The admin
surface"): unsigned, or signed by a user who is not the admin, a request with missing or
bad parameters gets 403, never the 400 that would describe what the route takes. And
``POST /_squall/sync?bucket=B`` by a user who may not list B is refused before anything
is counted or flushed. A real gateway, requests signed with botocore's signer."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.gateway.auth.test_users_e2e import add_user, client
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess
from tests.support.signing import signed_headers

# (method, path and query): every admin route, with parameters missing or malformed.
ROUTES = [
    ("GET", "/_squall/users"),
    ("POST", "/_squall/users"),  # name missing
    ("PUT", "/_squall/users?max_requests=many"),  # name missing, a bad number
    ("DELETE", "/_squall/users"),
    ("GET", "/_squall/qos"),
    ("PUT", "/_squall/qos?gear=fast"),  # no bucket or user, a bad field
    ("DELETE", "/_squall/qos"),
    ("GET", "/_squall/providers"),
    ("POST", "/_squall/providers"),  # path missing
    ("POST", "/_squall/providers?path=/tmp&standby=perhaps"),
    ("POST", "/_squall/elastic/next-size"),  # size missing
    ("POST", "/_squall/elastic/next-size?size=big"),
    ("POST", "/_squall/cluster/leave"),
    ("GET", "/_squall/status"),
    ("GET", "/_squall/metrics"),
    ("GET", "/_squall/cluster"),
    ("GET", "/_squall/ui/data"),
]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    # the status views closed, as by default
    server = SquallProcess(tmp_path_factory.mktemp("admin") / "data",
                           ["--cache-admission", "cache", "--backend-bandwidth", "1B/s"],
                           public_status=False).start()
    yield server
    assert server.stop() == 0, server.log()


@pytest.fixture(scope="module")
def carol(gateway: SquallProcess) -> dict[str, Any]:
    return add_user(gateway, "carol")


def _send(gateway: SquallProcess, method: str, target: str,
          keys: tuple[str, str] | None) -> httpx.Response:
    url = gateway.endpoint + target
    headers = {} if keys is None else signed_headers(method, url, access_key=keys[0],
                                                     secret_key=keys[1])
    return httpx.request(method, url, headers=headers, timeout=30)


def _dirty(gateway: SquallProcess) -> int:
    """The unflushed bytes, read by the admin (summed over workers)."""
    body = _send(gateway, "GET", "/_squall/status?workers=all", (ACCESS_KEY, SECRET_KEY)).json()
    return sum(int(w["dirty_bytes"]) for w in body.get("workers", [body]))


@pytest.mark.parametrize("method,target", ROUTES)
def test_unsigned_callers_get_403_before_any_400(gateway: SquallProcess, method: str,
                                                 target: str) -> None:
    answer = _send(gateway, method, target, None)
    assert answer.status_code == 403, answer.text
    assert "Field required" not in answer.text and "name" not in answer.text.lower()


@pytest.mark.parametrize("method,target", ROUTES)
def test_other_users_get_403_access_denied_before_any_400(
        gateway: SquallProcess, carol: dict[str, Any], method: str, target: str) -> None:
    if target == "/_squall/cluster":
        pytest.skip("a user reads the ring of /_squall/cluster (docs/security.md)")
    answer = _send(gateway, method, target, (carol["access_key"], carol["secret_key"]))
    assert answer.status_code == 403, answer.text
    if target.startswith(("/_squall/status", "/_squall/metrics", "/_squall/ui")):
        return  # the status gate's own answer
    assert answer.json()["error"] == "AccessDenied", answer.text


def test_the_admin_gets_the_400(gateway: SquallProcess) -> None:
    """The same bad parameters, signed by the admin: now they are what is wrong."""
    answer = _send(gateway, "POST", "/_squall/users", (ACCESS_KEY, SECRET_KEY))
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "InvalidArgument" and "name" in answer.text
    answer = _send(gateway, "POST", "/_squall/elastic/next-size?size=big",
                   (ACCESS_KEY, SECRET_KEY))
    assert answer.status_code == 400, answer.text


def test_sync_of_a_bucket_the_caller_may_not_list(gateway: SquallProcess,
                                                  carol: dict[str, Any]) -> None:
    """The backend takes a byte per second: what the admin wrote stays unflushed. Carol's
    sync of the admin's bucket is refused without a count, and flushes nothing. (A sync
    the caller may make: tests/gateway/commands/test_sync.py.)"""
    name = f"b-{uuid.uuid4().hex[:12]}"
    admin_s3 = client(gateway.endpoint, ACCESS_KEY, SECRET_KEY)
    admin_s3.create_bucket(Bucket=name)
    admin_s3.put_object(Bucket=name, Key="secret", Body=b"x" * 4096)
    dirty_before = _dirty(gateway)
    assert dirty_before >= 4096
    keys = (carol["access_key"], carol["secret_key"])
    answer = _send(gateway, "POST", f"/_squall/sync?bucket={name}", keys)
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"] == "AccessDenied"
    assert "total" not in answer.text and "done" not in answer.text
    assert _dirty(gateway) == dirty_before  # nothing flushed
    # a bucket that does not exist is NoSuchBucket
    missing = _send(gateway, "POST", f"/_squall/sync?bucket=no-{name}", keys)
    assert missing.status_code == 404, missing.text
