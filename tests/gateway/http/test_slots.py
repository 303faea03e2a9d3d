"""Connection slots: one client address cannot take them all, probes always get in, and
headers are hurried while slots run short. The attacks run for real against a gateway
on loopback (other client addresses are 127.0.0.x), scaled down by its settings."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from gateway.http.slots import (
    ClientSlots,
    Slot,
    SlotLimits,
    client_key,
    per_client_default,
)
from tests.conftest import make_client
from tests.support.server import SquallProcess

# -- the slot table ---------------------------------------------------------------------


def test_an_address_gets_its_share_then_nothing() -> None:
    slots = ClientSlots(SlotLimits(max_connections=16, per_client=4, probe_reserve=8))
    given = [slots.admit("192.0.2.1") for _ in range(6)]
    assert given == [Slot.REGULAR] * 4 + [Slot.REFUSED] * 2
    assert slots.admit("192.0.2.2") is Slot.REGULAR  # another address is not affected
    assert slots.held_by("192.0.2.1") == (4, 0)
    slots.release("192.0.2.1", Slot.REGULAR)
    assert slots.admit("192.0.2.1") is Slot.REGULAR
    for slot in given:  # four regular, two refused (releasing those changes nothing)
        slots.release("192.0.2.1", slot)
    assert slots.held_by("192.0.2.1") == (0, 0) and (slots.regular, slots.probe) == (1, 0)


def test_a_full_server_keeps_probe_slots_for_addresses_that_hold_none() -> None:
    slots = ClientSlots(SlotLimits(max_connections=4, per_client=None, probe_reserve=4))
    assert [slots.admit(f"192.0.2.{i}") for i in range(4)] == [Slot.REGULAR] * 4
    assert slots.admit("192.0.2.0") is Slot.REFUSED  # it holds regular slots already
    assert [slots.admit("198.51.100.1") for _ in range(2)] == [Slot.PROBE, Slot.REFUSED]
    assert [slots.admit(f"198.51.100.{i}") for i in range(2, 6)] == [Slot.PROBE] * 3 + [
        Slot.REFUSED]  # the reserve is full
    assert slots.admit("192.0.2.9", adopted=True) is Slot.REGULAR  # admitted where it came
    assert slots.held_by("198.51.100.1") == (0, 1)


def test_slots_become_busy_once_until_they_fall_back() -> None:
    slots = ClientSlots(SlotLimits(max_connections=16, per_client=None))
    became = [(slots.admit(None), slots.became_busy())[1] for _ in range(13)]
    assert became == [False] * 11 + [True, False]  # busy at 12 (three quarters)
    slots.release(None, Slot.REGULAR)  # 12: still busy, not noticed again
    slots.admit(None)
    assert not slots.became_busy()
    for _ in range(3):
        slots.release(None, Slot.REGULAR)
    slots.admit(None)
    assert not slots.became_busy()  # 11, below the mark but not far below
    for _ in range(3):
        slots.release(None, Slot.REGULAR)  # 8, an eighth below
    assert not slots.became_busy()
    for _ in range(4):
        slots.admit(None)
    assert slots.became_busy()


@pytest.mark.parametrize(("client", "key"), [
    (("192.0.2.7", 5000), "192.0.2.7"),
    (("2001:db8:1:2:3:4:5:6", 5000), "2001:db8:1:2::/64"),
    (("2001:db8:1:2:ffff::1", 5001), "2001:db8:1:2::/64"),  # one host, one /64
    (("::ffff:192.0.2.7", 5000), "192.0.2.7"),
    (("fe80::1%eth0", 5000), "fe80::/64"),
    (None, None),
])
def test_client_keys(client: tuple[str, int] | None, key: str | None) -> None:
    assert client_key(client) == key


def test_the_default_share_is_a_quarter() -> None:
    assert per_client_default(1024) == 256 and per_client_default(3) == 1


# -- attacks on a real gateway ----------------------------------------------------------

MAX_CONNECTIONS = 48  # 1,024 scaled down; a quarter (12) per client address
ATTACK_CONNECTIONS = 52  # 1,100 scaled down: more than every slot
ROUNDS = 50  # a read and a health probe each, while the attack goes on
ATTACK_MAX_S = 120.0  # the attack's bound, should the machine be very slow
HEADER_TIMEOUT = "30"
BUSY_TIMEOUT = "0.5"


@dataclass
class Trickler:
    """A hostile client: keeps ``target`` connections open from its ``sources``, sends
    one byte of a header that never ends on each every ``interval``, and reconnects
    each one the server closes; stops when told, or after ``ATTACK_MAX_S``, or when it
    has connected ``max_connects`` times."""

    port: int
    sources: list[str]
    target: int
    interval: float = 0.2
    max_connects: int = 20_000
    connects: int = 0
    timed_out: int = 0  # connections answered 400 RequestTimeout
    expired: bool = False  # it stopped on its own bound, not when told
    ready: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)

    HEAD = b"GET /victim/k HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "

    def run(self) -> None:
        open_: list[tuple[socket.socket, int]] = []
        end = time.monotonic() + ATTACK_MAX_S
        try:
            while not self.stop.is_set():
                if time.monotonic() > end or self.connects >= self.max_connects:
                    self.expired = True
                    break
                while len(open_) < self.target and self.connects < self.max_connects:
                    sock = socket.socket()
                    sock.setblocking(False)
                    sock.bind((self.sources[self.connects % len(self.sources)], 0))
                    sock.connect_ex(("127.0.0.1", self.port))
                    open_.append((sock, 0))
                    self.connects += 1
                time.sleep(self.interval)
                kept = []
                for sock, sent in open_:
                    if self._alive(sock, sent):
                        kept.append((sock, sent + 1))
                    else:
                        sock.close()
                open_ = kept
                self.ready.set()
        finally:
            for sock, _ in open_:
                sock.close()
            self.ready.set()

    def _alive(self, sock: socket.socket, sent: int) -> bool:
        try:
            if sock.recv(4096).startswith(b"HTTP/1.1 400 "):
                self.timed_out += 1  # (the header timeout's answer, 400 RequestTimeout)
            return False  # an answer or the end: closed
        except BlockingIOError:
            pass
        except OSError:  # reset: refused, or not connected yet (loopback: at once)
            return False
        byte = self.HEAD[sent:sent + 1] or b"a"
        try:
            sock.send(byte)
        except BlockingIOError:
            pass
        except OSError:
            return False
        return True


@dataclass
class Tally:
    ok: int = 0
    failed: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.ok / max(self.ok + len(self.failed), 1)


def get(url: str, source: str, tally: Tally, expect: bytes | None = None,
        client: httpx.Client | None = None) -> None:
    """One GET, on a new connection from ``source`` unless ``client`` is given."""
    try:
        if client is not None:
            answer = client.get(url)
        else:
            with httpx.Client(transport=httpx.HTTPTransport(local_address=source),
                              timeout=5) as fresh:
                answer = fresh.get(url)
        if answer.status_code == 200 and (expect is None or answer.content == expect):
            tally.ok += 1
        else:
            tally.failed.append(f"{answer.status_code} {answer.content[:80]!r}")
    except httpx.HTTPError as e:
        tally.failed.append(repr(e))


def gateway(tmp_path: Path, workers: int) -> SquallProcess:
    return SquallProcess(tmp_path / "data", [
        "--max-connections", str(MAX_CONNECTIONS), "--header-timeout", HEADER_TIMEOUT,
        "--header-timeout-busy", BUSY_TIMEOUT, "--workers", str(workers)]).start(timeout=90)


@contextlib.contextmanager
def attack(trickler: Trickler) -> Iterator[Trickler]:
    thread = threading.Thread(target=trickler.run, daemon=True)
    thread.start()
    try:
        assert trickler.ready.wait(30)
        time.sleep(1.0)  # it holds what it can get
        yield trickler
        assert not trickler.expired, "the attack ended before the other clients were done"
    finally:
        trickler.stop.set()
        thread.join(30)
        assert not thread.is_alive()


def victims(server: SquallProcess, trickler: Trickler, *,
            keep_alive: bool) -> tuple[Tally, Tally]:
    """Another client's GETs (from 127.0.0.2) and health probes (from 127.0.0.3), until
    the attack ends."""
    s3 = make_client(server.endpoint)
    s3.create_bucket(Bucket="victim")
    s3.put_object(Bucket="victim", Key="k", Body=b"v" * 4096)
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "victim", "Key": "k"},
                                    ExpiresIn=600)
    health = f"{server.endpoint}/_squall/health"
    reads, probes = Tally(), Tally()
    own = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=5)
    with own:
        if keep_alive:  # its connection, opened before the flood
            assert own.get(url).status_code == 200
        with attack(trickler):
            for _ in range(ROUNDS):
                get(url, "127.0.0.2", reads, b"v" * 4096, own if keep_alive else None)
                get(health, "127.0.0.3", probes)
                time.sleep(0.02)
    return reads, probes


def served_under_attack(tmp_path: Path, workers: int, make: Callable[[int], Trickler], *,
                        keep_alive: bool) -> tuple[Trickler, int]:
    """A fresh gateway attacked by ``make(port)`` while the victims' reads and health
    probes run: at least 99 % of each are served. The trickler and the count of refused
    connections."""
    server = gateway(tmp_path, workers)
    try:
        trickler = make(server.port)
        reads, probes = victims(server, trickler, keep_alive=keep_alive)
        refused = server.counter("connections_refused")
    finally:
        assert server.stop() == 0, server.log()
    assert reads.rate >= 0.99, reads.failed[:5]
    assert probes.rate >= 0.99, probes.failed[:5]
    return trickler, refused


@pytest.mark.parametrize("workers", [1, 2])
def test_one_client_flooding_connections_leaves_room_for_others(
        tmp_path: Path, workers: int) -> None:
    """One address opens more connections than there are slots and trickles header
    bytes on all of them, reconnecting what is closed: it holds its share (a quarter,
    per worker), the others' requests on new connections and the health probe are
    served."""
    trickler, refused = served_under_attack(
        tmp_path, workers, lambda port: Trickler(port, ["127.0.0.1"], ATTACK_CONNECTIONS),
        keep_alive=False)
    # It was held to its share: what it could not get was refused.
    assert trickler.connects > ATTACK_CONNECTIONS and refused > 0


def test_many_addresses_filling_every_slot_leave_probes_and_open_connections(
        tmp_path: Path) -> None:
    """Eight addresses together ask for more than every slot: slots are busy, so the
    header deadline shrinks to ``header_timeout_busy`` and the trickled connections are
    closed quickly; the probe slots keep the health check answered, and a client's
    kept-alive connection keeps being served."""
    trickler, refused = served_under_attack(
        tmp_path, 1, lambda port: Trickler(port, [f"127.0.0.{i}" for i in range(10, 18)],
                                           2 * MAX_CONNECTIONS, interval=0.1),
        keep_alive=True)
    assert refused > 0
    # Trickled connections were answered 400 RequestTimeout: header_timeout_busy, as
    # the attack lasts a few seconds, not the 30 s of header_timeout.
    assert trickler.timed_out > 0
