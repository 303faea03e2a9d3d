"""Peer markers: accepted only as signed, for this member, in time, once."""

from __future__ import annotations

import pytest

from gateway.cluster.errors import PeerAuthFailed
from gateway.cluster.peerauth import Marker, PeerAuth, marker_target
from gateway.cluster.view import member_id

SECRET = b"cluster-secret-for-tests"
A, B, C = (member_id(f"http://169.254.0.{i}:9000") for i in (1, 2, 3))


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def pair(clock: Clock, *, secret: bytes = SECRET) -> tuple[PeerAuth, PeerAuth]:
    sender = PeerAuth(secret, member=A, clock=clock)
    receiver = PeerAuth(SECRET, member=B, clock=clock)
    return sender, receiver


def test_a_signed_request_verifies_once() -> None:
    clock = Clock()
    sender, receiver = pair(clock)
    marker = sender.sign("PUT", b"/bkt/a%20b", b"uploadId=x&partNumber=1", B, "17")
    assert marker_target(marker) == B
    assert receiver.verify("PUT", b"/bkt/a%20b", b"uploadId=x&partNumber=1",
                           marker) == Marker(A, "17")
    with pytest.raises(PeerAuthFailed, match="already used"):
        receiver.verify("PUT", b"/bkt/a%20b", b"uploadId=x&partNumber=1", marker)
    # forwarded S3 requests (protected by the client's SigV4 too) keep no nonce
    marker = sender.sign("GET", b"/bkt/k", b"", B, "17")
    for _ in range(2):
        assert receiver.verify("GET", b"/bkt/k", b"", marker, once=False).sender == A


@pytest.mark.parametrize("method,path,query", [
    ("GET", b"/bkt/key", b""), ("PUT", b"/bkt/other", b""), ("PUT", b"/bkt/key", b"x=1")])
def test_a_marker_does_not_fit_another_request(method: str, path: bytes, query: bytes) -> None:
    sender, receiver = pair(Clock())
    marker = sender.sign("PUT", b"/bkt/key", b"", B, "1")
    with pytest.raises(PeerAuthFailed, match="does not match"):
        receiver.verify(method, path, query, marker)


def test_wrong_secret_is_refused() -> None:
    sender, receiver = pair(Clock(), secret=b"another-secret-entirely")
    with pytest.raises(PeerAuthFailed, match="does not match"):
        receiver.verify("GET", b"/b/k", b"", sender.sign("GET", b"/b/k", b"", B, "1"))


def test_spoofed_and_malformed_markers_are_refused() -> None:
    _, receiver = pair(Clock())
    for value in ("", "v2", f"v2:{A}:{B}:1800000000:abcd:1:00",
                  f"v2:{A}:{B}:x:y:1:" + "0" * 64, f"v1:{A}:{B}:1800000000:abcd:1:" + "0" * 64,
                  f"v2:{A}:{B}:1800000000:abcd:1:" + "0" * 64):
        with pytest.raises(PeerAuthFailed):
            receiver.verify("GET", b"/b/k", b"", value)


def test_a_marker_for_another_member_is_refused() -> None:
    clock = Clock()
    sender, _ = pair(clock)
    third = PeerAuth(SECRET, member=C, clock=clock)
    with pytest.raises(PeerAuthFailed, match="another member"):
        third.verify("GET", b"/b/k", b"", sender.sign("GET", b"/b/k", b"", B, "1"))


@pytest.mark.parametrize("shift", [-31.0, 31.0])
def test_expired_or_future_markers_are_refused(shift: float) -> None:
    clock = Clock()
    sender, receiver = pair(clock)
    marker = sender.sign("GET", b"/b/k", b"", B, "1")
    clock.now += shift
    with pytest.raises(PeerAuthFailed, match="expired"):
        receiver.verify("GET", b"/b/k", b"", marker)


def test_nonces_are_forgotten_after_the_window() -> None:
    clock = Clock()
    sender, receiver = pair(clock)
    for _ in range(100):
        receiver.verify("GET", b"/b/k", b"", sender.sign("GET", b"/b/k", b"", B, "1"))
    clock.now += 61
    receiver.verify("GET", b"/b/k", b"", sender.sign("GET", b"/b/k", b"", B, "1"))
    assert len(receiver._seen) == 1
