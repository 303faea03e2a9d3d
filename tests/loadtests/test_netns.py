"""The namespace network for real: TCP between hosts, cuts that stall open connections,
isolation, netem delay, and nothing left behind."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loadtests.netns import (
    TEST_SCHEME,
    Host,
    NetemUnavailable,
    Network,
    netem_available,
    netns_available,
    remove_leftovers,
)

pytestmark = pytest.mark.slow

PORT = 7000

#: A line-echo TCP server: ``ECHO <address> <port>``; prints "listening" when ready.
ECHO = r"""
import socket, sys, threading
srv = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("listening", flush=True)
def serve(c):
    with c:
        while data := c.recv(65536):
            c.sendall(data)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""

#: One long-lived connection driven from stdin: ``send X`` writes X, ``recv T`` waits up
#: to T seconds for data and prints ``got X`` or ``timeout``.
CLIENT = r"""
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
print("connected", flush=True)
for line in sys.stdin:
    cmd, arg = line.split()
    if cmd == "send":
        s.sendall(arg.encode())
        print("sent", flush=True)
    else:
        s.settimeout(float(arg))
        try:
            print("got", s.recv(100).decode(), flush=True)
        except TimeoutError:
            print("timeout", flush=True)
"""

#: A new connection: prints "ok", or the exception's name (exit 1).
CONNECT = r"""
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
except OSError as e:
    print(type(e).__name__)
    sys.exit(1)
print("ok")
"""

#: The median of 5 echo round trips, in seconds.
RTT = r"""
import socket, statistics, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
times = []
for _ in range(5):
    t = time.monotonic()
    s.sendall(b"x")
    s.recv(1)
    times.append(time.monotonic() - t)
print(statistics.median(times))
"""


def _require() -> None:
    reason = netns_available()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture
def net() -> Iterator[Network]:
    _require()
    with Network() as network:
        yield network


def _ours() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                         check=True).stdout
    return [line.split()[0] for line in out.splitlines()
            if line.startswith(f"{TEST_SCHEME}{os.getpid()}-")]


def _echo(host: Host) -> subprocess.Popen[str]:
    proc = host.popen([sys.executable, "-c", ECHO, host.address, str(PORT)],
                      stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "listening"
    return proc


def _connect(client: Host, server: Host, timeout: float = 1.0) -> str:
    done = client.run([sys.executable, "-c", CONNECT, server.address, str(PORT), str(timeout)],
                      capture_output=True, text=True, timeout=30)
    return str(done.stdout.strip())


def _rtt(client: Host, server: Host) -> float:
    done = client.run([sys.executable, "-c", RTT, server.address, str(PORT)],
                      capture_output=True, text=True, timeout=60, check=True)
    return float(done.stdout)


def test_hosts_talk_http_and_the_root_namespace_is_untouched(net: Network,
                                                             tmp_path: Path) -> None:
    server, client = net.add_host("server"), net.add_host("client")
    assert server.address != client.address
    assert server.address.rsplit(".", 1)[0] == client.address.rsplit(".", 1)[0]
    # Link-local (169.254.0.0/16): never a private-range or public address.
    subnet = ipaddress.ip_network(net.subnet)
    assert subnet.subnet_of(ipaddress.ip_network("169.254.0.0/16"))
    for address in (server.address, client.address):
        assert ipaddress.ip_address(address).is_link_local
        assert ipaddress.ip_address(address) in subnet
    (tmp_path / "hello.txt").write_text("hello from the server namespace")
    net_prefix = net.subnet.rsplit(".", 1)[0] + "."
    server.popen([sys.executable, "-m", "http.server", str(PORT), "--bind", server.address,
                  "--directory", str(tmp_path)], stderr=subprocess.DEVNULL)
    fetch = ("import sys, time, urllib.request\n"
             "for _ in range(100):\n"
             "    try:\n"
             "        print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())\n"
             "        break\n"
             "    except OSError:\n"
             "        time.sleep(0.1)\n")
    done = client.run([sys.executable, "-c", fetch, f"http://{server.address}:{PORT}/hello.txt"],
                      capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "hello from the server namespace", done.stderr
    # Nothing of the subnet in the root namespace: no address, no route to the hosts.
    root = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True,
                          check=True).stdout
    routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True,
                            check=True).stdout
    assert net_prefix not in root and net_prefix not in routes


def test_subnets_outside_link_local_are_refused() -> None:
    with pytest.raises(ValueError, match="subnets must be within"):
        Network(subnets=range(250, 260))  # 169.254.255.x is reserved, 256+ no octet
    with pytest.raises(ValueError, match="subnets must be within"):
        Network(subnets=range(2))


def test_run_passes_env_cwd_and_output_through(net: Network, tmp_path: Path) -> None:
    host = net.add_host("h")
    done = host.run(["sh", "-c", 'echo "$GREETING" && pwd && ip -o -4 addr show eth0'],
                    env={**os.environ, "GREETING": "hi"}, cwd=tmp_path,
                    capture_output=True, text=True, check=True)
    greeting, cwd, addr = done.stdout.splitlines()
    assert (greeting, cwd) == ("hi", str(tmp_path)) and f"inet {host.address}/24" in addr


def test_cut_stalls_an_established_connection_and_new_ones_until_healed(net: Network) -> None:
    server, client = net.add_host("server"), net.add_host("client")
    _echo(server)
    conn = client.popen([sys.executable, "-c", CLIENT, server.address, str(PORT)],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert conn.stdin is not None and conn.stdout is not None

    def ask(line: str) -> str:
        assert conn.stdin is not None and conn.stdout is not None
        conn.stdin.write(line + "\n")
        conn.stdin.flush()
        return str(conn.stdout.readline().strip())

    assert conn.stdout.readline().strip() == "connected"
    assert ask("send a") == "sent" and ask("recv 5") == "got a"

    net.cut(client, server)
    assert net.cuts == {frozenset(("client", "server"))}
    assert ask("send b") == "sent"
    assert ask("recv 1") == "timeout"  # the open connection's bytes no longer get through
    assert _connect(client, server) == "TimeoutError"  # dropped, not refused
    assert _connect(server, client) == "TimeoutError"

    net.heal()
    assert net.cuts == set()
    assert ask("recv 15") == "got b"  # TCP's retransmission gets through after healing
    assert ask("send c") == "sent" and ask("recv 5") == "got c"
    assert _connect(client, server, 5) == "ok"
    conn.stdin.close()
    conn.wait(10)


def test_isolate_cuts_one_host_from_all_and_heal_of_it_restores(net: Network) -> None:
    a, b, c = (net.add_host(n) for n in "abc")
    for host in (a, b, c):
        _echo(host)
    net.isolate(a)
    assert net.cuts == {frozenset("ab"), frozenset("ac")}
    assert _connect(b, c) == "ok" and _connect(c, b) == "ok"
    assert _connect(b, a, 0.5) == "TimeoutError" and _connect(a, c, 0.5) == "TimeoutError"
    net.cut(b, c)
    net.heal("a")  # only a's cuts
    assert net.cuts == {frozenset("bc")}
    assert _connect(b, a) == "ok" and _connect(a, c) == "ok"
    assert _connect(b, c, 0.5) == "TimeoutError"
    net.heal(c, b)
    assert net.cuts == set() and _connect(b, c) == "ok"


def test_slow_adds_delay_and_unslow_removes_it(net: Network) -> None:
    reason = netem_available()
    if reason is not None:
        pytest.skip(reason)
    server, client = net.add_host("server"), net.add_host("client")
    _echo(server)
    net.slow(server, 100)
    slowed = [_rtt(client, server)]
    assert min(slowed) >= 0.09  # every reply leaves the server 100 ms late
    net.slow(server, 50, jitter_ms=10, loss_pct=0, rate="100mbit")  # replaces
    assert _rtt(client, server) >= 0.035
    net.unslow(server)
    net.unslow(server)  # nothing to remove: no error
    assert _rtt(client, server) < 0.05


def test_slow_fails_clearly_without_netem(net: Network) -> None:
    if netem_available() is None:
        pytest.skip("netem is available here")
    host = net.add_host("h")
    with pytest.raises(NetemUnavailable, match="netem"):
        net.slow(host, 100)
    net.unslow(host)


def test_close_leaves_nothing_and_is_idempotent() -> None:
    _require()
    net = Network()
    procs: list[subprocess.Popen[Any]] = []
    for name in ("one", "two"):
        procs.append(net.add_host(name).popen(["sleep", "300"]))
    net.cut("one", "two")
    assert len(_ours()) == 3
    net.close()
    assert _ours() == []
    assert all(p.poll() is not None for p in procs)
    net.close()
    with pytest.raises(RuntimeError):
        net.add_host("three")


def test_close_on_error_inside_the_block() -> None:
    _require()
    with pytest.raises(ValueError, match="duplicate"), Network() as net:
        net.add_host("x")
        net.add_host("x")
    assert _ours() == []


def test_leftovers_of_dead_processes_are_removed_at_construction() -> None:
    _require()
    dead = f"{TEST_SCHEME}4194305-0-sw"  # above PID_MAX_LIMIT: never a live process
    alive = f"{TEST_SCHEME}{os.getpid()}-999999-sw"
    for name in (dead, alive):
        subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        with Network():
            pass
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                               check=True).stdout
        assert dead not in names and alive in names
        assert remove_leftovers() == []
    finally:
        for name in (dead, alive):
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, check=False)
