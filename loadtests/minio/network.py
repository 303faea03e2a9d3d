"""A private network of Linux network namespaces for the distributed MinIO.

One "switch" namespace holds a bridge; each host is a namespace of its own joined to it by
a veth pair (``eth0`` inside), with one address of a /24 that exists only there. Nothing is
added to the root namespace. Names are ``squall-m-<pid>-<n>-sw`` and
``squall-m-<pid>-<n>-<host>``: a new network first deletes namespaces of that scheme whose
``<pid>`` is gone (a launcher killed before it could clean up). The test suite's own
namespace network (``tests/support/netns.py``, with link cuts) follows the same plan; this
one lives here because ``python -m loadtests.minio`` runs without the tests.
"""

from __future__ import annotations

import contextlib
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

PREFIX = "squall-m-"
_LEFTOVER = re.compile(rf"^{PREFIX}(\d+)-")
_networks = itertools.count()


class NetworkError(RuntimeError):
    """A namespace or link command failed (its stderr is the message)."""


def tool(name: str) -> str:
    """``name`` on PATH or in /usr/sbin:/sbin (ip, for one, often lives there)."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin") or name


def _run(argv: Sequence[str], *, check: bool = True) -> str:
    done = subprocess.run([tool(argv[0]), *argv[1:]], capture_output=True, text=True,
                          timeout=30, check=False)
    if check and done.returncode != 0:
        raise NetworkError(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _delete_namespace(name: str) -> None:
    """Kill what still runs in the namespace (only the launcher starts processes there),
    then delete it; its veth ends go with it."""
    for pid in _run(["ip", "netns", "pids", name], check=False).split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    _run(["ip", "netns", "delete", name], check=False)


def remove_leftovers() -> list[str]:
    """Delete namespaces of this scheme whose creating process is gone."""
    removed = []
    for line in _run(["ip", "netns", "list"]).splitlines():
        name = line.split()[0] if line.strip() else ""
        match = _LEFTOVER.match(name)
        if match and not _alive(int(match.group(1))):
            _delete_namespace(name)
            removed.append(name)
    return removed


def unavailable() -> str | None:
    """Why namespaces cannot be made here (a skip reason), or None."""
    if os.geteuid() != 0:
        return "network and mount namespaces need root"
    for name, package in (("ip", "iproute2"), ("unshare", "util-linux")):
        if shutil.which(tool(name)) is None:
            return f"`{name}` is missing (apt-get install {package})"
    return None


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
        """Start ``argv`` in the namespace; the network kills it at ``close()``."""
        proc: subprocess.Popen[Any] = subprocess.Popen(self.argv(argv), **kwargs)
        self.network.processes.append(proc)
        return proc

    def run(self, argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[Any]:
        """Run ``argv`` in the namespace to completion (``kwargs`` as subprocess.run's)."""
        check = bool(kwargs.pop("check", False))
        done: subprocess.CompletedProcess[Any] = subprocess.run(self.argv(argv), check=check,
                                                                **kwargs)
        return done


class Network:
    """A bridge and the hosts joined to it; ``close()`` removes all of it."""

    def __init__(self) -> None:
        n = next(_networks)
        pid = os.getpid()
        self.prefix = f"{PREFIX}{pid}-{n}-"
        # 10.150-199.x: apart from the test suite's networks (10.200-255.x).
        self.subnet = f"10.{150 + n % 50}.{pid % 256}.0/24"
        self.hosts: dict[str, Host] = {}
        self.processes: list[subprocess.Popen[Any]] = []
        self._made: list[str] = []
        self._closed = False
        remove_leftovers()
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
        """A new namespace on the bridge with ``lo`` and ``eth0`` up and the next address."""
        if self._closed:
            raise NetworkError("the network is closed")
        if name in self.hosts or name == "sw" or len(self.hosts) > 252:
            raise ValueError(f"bad or duplicate host name {name!r}")
        index = len(self.hosts)
        address = self.subnet.rsplit(".", 1)[0] + f".{index + 1}"
        netns = f"{self.prefix}{name}"
        self._add_namespace(netns)
        port = f"v{index}"
        _run(["ip", "-n", self.switch, "link", "add", port, "type", "veth", "peer", "name",
              "eth0", "netns", netns])
        _run(["ip", "-n", self.switch, "link", "set", port, "master", "br0", "up"])
        _run(["ip", "-n", netns, "addr", "add", f"{address}/24", "dev", "eth0"])
        _run(["ip", "-n", netns, "link", "set", "eth0", "up"])
        host = Host(name, netns, address, self)
        self.hosts[name] = host
        return host

    def close(self) -> None:
        """Kill the processes started in the hosts (by PID), delete every namespace made.
        Idempotent."""
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
