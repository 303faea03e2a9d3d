"""A private network of Linux network namespaces, with reversible fault injection (the
test suite's partitions, the distributed MinIO of ``python -m loadtests.minio``).

A :class:`Network` is one "switch" namespace holding a bridge, plus one namespace per
:class:`Host`, joined to the bridge by a veth pair (``eth0`` on the host's side). Nothing
is added to the root namespace: its interfaces, addresses and routes stay untouched, so
clients of the servers under test run in a host of their own (e.g. one named "client").

Names and addresses (chosen so that concurrent pytest processes and leftovers of crashed
ones never collide):

* namespaces are ``<scheme><pid>-<n>-sw`` (the switch) and ``<scheme><pid>-<n>-<host>``
  (the scheme ``squall-t-`` for tests, ``squall-m-`` for the MinIO launcher), where
  ``<pid>`` is the creating process and ``<n>`` counts its Networks; a new Network first
  deletes namespaces of its scheme whose ``<pid>`` is no longer alive (killing the
  processes still inside them, which only their Network ever starts there);
* each Network gets a link-local ``169.254.<s>.0/24`` (RFC 3927: never routed, and
  never a private-range or public address, so no test or benchmark sends a packet to
  an address someone else may use, even inside a namespace), ``s`` taking turns by
  ``(pid + n) % count`` over its scheme's range (tests: 128-254, the launcher: 1-127;
  169.254.0.x and 169.254.255.x are reserved); host ``k`` (from 0) is ``.k+1``. The
  subnets live only on each Network's own bridge, so even an overlap between two
  Networks (concurrent processes) could not mix their traffic.

Faults: :meth:`Network.cut` adds the peer's address to a set of a table of our own
(``inet squall_faults``) in each host's namespace, whose prerouting chain drops every
packet from the set's addresses: established connections stall (the sender retransmits, as
over a dead link) and new ones time out; :meth:`Network.heal` removes the elements.
:meth:`Network.slow` puts ``netem`` on the host's ``eth0`` (the kernel's sch_netem).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

#: the namespace names of the test suite's networks
TEST_SCHEME = "squall-t-"
#: Every Network's /24 is in the link-local range 169.254.0.0/16 (its usable /24s)
LINK_LOCAL = "169.254"
LINK_LOCAL_SUBNETS = range(1, 255)
#: the test suite's third octets (the MinIO launcher takes 1-127)
TEST_SUBNETS = range(128, 255)
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
_networks = itertools.count()

#: The host side of every veth pair, in the host's namespace.
INTERFACE = "eth0"
#: Our nftables table in each host namespace: a set of cut-off peers, one dropping chain.
_FAULTS = """
table inet squall_faults {
    set cut { type ipv4_addr; }
    chain prerouting {
        type filter hook prerouting priority raw - 10; policy accept;
        ip saddr @cut drop
    }
}
"""


class NetnsError(RuntimeError):
    """A namespace, link, nftables or tc command failed (its stderr is the message)."""


class NetemUnavailable(NetnsError):
    """The kernel has no ``netem`` queueing discipline, so links cannot be slowed."""


def tool(name: str) -> str:
    """``name`` on PATH or in /usr/sbin:/sbin (ip, for one, often lives there)."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin") or name


def _run(argv: Sequence[str], *, stdin: str | None = None, check: bool = True) -> str:
    done = subprocess.run([tool(argv[0]), *argv[1:]], input=stdin, capture_output=True,
                          text=True, timeout=30, check=False)
    if check and done.returncode != 0:
        raise NetnsError(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _namespaces() -> list[str]:
    """The named namespaces (``ip netns list`` prints ``name (id: N)``)."""
    return [line.split()[0] for line in _run(["ip", "netns", "list"]).splitlines() if line]


def _delete_namespace(name: str) -> None:
    """Kill what still runs in the namespace (only tests start processes there), then
    delete it; its veth ends go with it."""
    for pid in _run(["ip", "netns", "pids", name], check=False).split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    _run(["ip", "netns", "delete", name], check=False)


def remove_leftovers(scheme: str = TEST_SCHEME) -> list[str]:
    """Delete namespaces of the naming ``scheme`` whose creating process is gone."""
    leftover = re.compile(rf"^{re.escape(scheme)}(\d+)-")
    removed = []
    for name in _namespaces():
        match = leftover.match(name)
        if match and not _alive(int(match.group(1))):
            _delete_namespace(name)
            removed.append(name)
    return removed


@dataclass(frozen=True, slots=True, eq=False)
class Host:
    """A namespace on the network; commands run in it with ``ip netns exec``."""

    name: str
    netns: str
    address: str
    network: Network = field(repr=False)

    def argv(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the namespace (``ip netns exec`` execs it: same PID)."""
        return [tool("ip"), "netns", "exec", self.netns, *argv]

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start ``argv`` in the namespace (``ip netns exec`` execs it: the PID is the
        command's). ``kwargs`` go to :class:`subprocess.Popen`; the Network kills the
        process at ``close()`` if it still runs."""
        proc: subprocess.Popen[Any] = subprocess.Popen(self.argv(argv), **kwargs)
        self.network.processes.append(proc)
        return proc

    def run(self, argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[Any]:
        """Run ``argv`` in the namespace to completion (``kwargs`` as
        :func:`subprocess.run`'s)."""
        check = bool(kwargs.pop("check", False))
        done: subprocess.CompletedProcess[Any] = subprocess.run(self.argv(argv), check=check,
                                                                **kwargs)
        return done


class Network:
    """A bridge and the hosts joined to it; ``close()`` removes all of it."""

    def __init__(self, *, scheme: str = TEST_SCHEME, subnets: range = TEST_SUBNETS,
                 faults: bool = True) -> None:
        """``scheme``: the namespaces' name prefix; ``subnets``: the third octets of
        ``169.254.0.0/16`` its networks take turns on; ``faults``: each host gets the nftables table that
        :meth:`cut` fills (needs nft)."""
        self._n = next(_networks)
        pid = os.getpid()
        self.prefix = f"{scheme}{pid}-{self._n}-"
        if not set(subnets) <= set(LINK_LOCAL_SUBNETS):
            raise ValueError(f"subnets must be within {LINK_LOCAL_SUBNETS}")
        self.subnet = f"{LINK_LOCAL}.{subnets[(pid + self._n) % len(subnets)]}.0/24"
        self.hosts: dict[str, Host] = {}
        self.processes: list[subprocess.Popen[Any]] = []
        self._faults = faults
        self._made: list[str] = []  # namespaces, in creation order
        self._cuts: set[frozenset[str]] = set()
        self._closed = False
        remove_leftovers(scheme)
        self.switch = f"{self.prefix}sw"
        try:
            self._add_namespace(self.switch)
            _run(["ip", "-n", self.switch, "link", "add", "br0", "type", "bridge"])
            _run(["ip", "-n", self.switch, "link", "set", "br0", "up"])
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _add_namespace(self, name: str) -> None:
        _run(["ip", "netns", "add", name])
        self._made.append(name)
        _run(["ip", "-n", name, "link", "set", "lo", "up"])

    def add_host(self, name: str) -> Host:
        """A new namespace joined to the bridge, with ``lo`` and ``eth0`` up, the next
        address of the subnet and (with ``faults``) our empty fault table."""
        if self._closed:
            raise NetnsError("the network is closed")
        if not _NAME.match(name) or name == "sw" or name in self.hosts:
            raise ValueError(f"bad or duplicate host name {name!r}")
        index = len(self.hosts)
        if index > 252:
            raise ValueError("a Network holds at most 253 hosts")
        address = self.subnet.rsplit(".", 1)[0] + f".{index + 1}"
        netns = f"{self.prefix}{name}"
        port = f"v{index}"
        self._add_namespace(netns)
        # Both ends are created inside our namespaces: no name ever appears in the root one.
        _run(["ip", "-n", self.switch, "link", "add", port, "type", "veth", "peer", "name",
              INTERFACE, "netns", netns])
        _run(["ip", "-n", self.switch, "link", "set", port, "master", "br0", "up"])
        _run(["ip", "-n", netns, "addr", "add", f"{address}/24", "dev", INTERFACE])
        _run(["ip", "-n", netns, "link", "set", INTERFACE, "up"])
        if self._faults:
            _run(["ip", "netns", "exec", netns, "nft", "-f", "-"], stdin=_FAULTS)
        host = Host(name, netns, address, self)
        self.hosts[name] = host
        return host

    def host(self, ref: Host | str) -> Host:
        name = ref if isinstance(ref, str) else ref.name
        host = self.hosts.get(name)
        if host is None or (isinstance(ref, Host) and host is not ref):
            raise ValueError(f"{name!r} is not a host of this network")
        return host

    def _set(self, host: Host, verb: str, peer: Host) -> None:
        _run(["ip", "netns", "exec", host.netns, "nft", verb, "element", "inet",
              "squall_faults", "cut", f"{{ {peer.address} }}"])

    def cut(self, a: Host | str, b: Host | str) -> None:
        """Drop every packet between ``a`` and ``b``, both ways, open connections too."""
        ha, hb = self.host(a), self.host(b)
        if ha is hb:
            raise ValueError("cannot cut a host from itself")
        pair = frozenset((ha.name, hb.name))
        if pair in self._cuts:
            return
        self._cuts.add(pair)
        self._set(ha, "add", hb)
        self._set(hb, "add", ha)

    def isolate(self, host: Host | str) -> None:
        """Cut ``host`` from every other host there is now."""
        h = self.host(host)
        for other in list(self.hosts.values()):
            if other is not h:
                self.cut(h, other)

    def heal(self, a: Host | str | None = None, b: Host | str | None = None) -> None:
        """Undo the cut between ``a`` and ``b``; every cut of ``a`` when ``b`` is None;
        every cut when both are None."""
        names = {self.host(x).name for x in (a, b) if x is not None}
        for pair in sorted(self._cuts, key=sorted):
            if names <= pair:
                self._cuts.discard(pair)
                ha, hb = (self.hosts[n] for n in sorted(pair))
                self._set(ha, "delete", hb)
                self._set(hb, "delete", ha)

    @property
    def cuts(self) -> set[frozenset[str]]:
        """The pairs of host names currently cut."""
        return set(self._cuts)

    def slow(self, host: Host | str, delay_ms: float, jitter_ms: float = 0,
             loss_pct: float = 0, rate: str | None = None) -> None:
        """Delay (and optionally jitter, lose, rate-limit, e.g. ``rate="10mbit"``) every
        packet ``host`` sends: each round trip with it grows by ``delay_ms``. Raises
        :class:`NetemUnavailable` when the kernel has no sch_netem."""
        h = self.host(host)
        argv = ["tc", "-n", h.netns, "qdisc", "replace", "dev", INTERFACE, "root", "netem",
                "delay", f"{delay_ms}ms"]
        if jitter_ms:
            argv.append(f"{jitter_ms}ms")
        if loss_pct:
            argv += ["loss", f"{loss_pct}%"]
        if rate:
            argv += ["rate", rate]
        try:
            _run(argv)
        except NetnsError as e:
            if "unknown" in str(e).lower():
                raise NetemUnavailable(
                    "the kernel has no netem queueing discipline (CONFIG_NET_SCH_NETEM, "
                    f"module sch_netem), so links cannot be slowed here: {e}") from e
            raise

    def unslow(self, host: Host | str) -> None:
        """Remove what :meth:`slow` added (nothing happens if the host is not slowed)."""
        h = self.host(host)
        _run(["tc", "-n", h.netns, "qdisc", "del", "dev", INTERFACE, "root"], check=False)

    def close(self) -> None:
        """Kill the processes started in the hosts, delete every namespace made (and with
        them the bridge and veths). Idempotent."""
        if self._closed:
            return
        self._closed = True
        for proc in self.processes:
            if proc.poll() is None:
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
        for name in reversed(self._made):
            _delete_namespace(name)
        self._made.clear()
        self._cuts.clear()


@functools.cache
def netns_available() -> str | None:
    """None when namespaces, veth pairs, bridges and nftables work here; otherwise why
    not (for ``pytest.skip``). Leaves nothing behind."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for name in ("ip", "nft", "tc"):
        if shutil.which(tool(name)) is None:
            package = {"ip": "iproute2", "nft": "nftables", "tc": "iproute2"}[name]
            return f"`{name}` is missing (apt-get install {package})"
    try:
        with Network() as net:
            net.add_host("probe")
    except (NetnsError, OSError, subprocess.SubprocessError) as e:
        return f"cannot build a namespace network here: {e}"
    return None


@functools.cache
def netem_available() -> str | None:
    """None when :meth:`Network.slow` works here; otherwise why not."""
    reason = netns_available()
    if reason is not None:
        return reason
    try:
        with Network() as net:
            net.slow(net.add_host("probe"), 1)
    except NetnsError as e:
        return str(e)
    return None
