"""Real etcd servers for tests: a static cluster on loopback, or one member per host of a
:class:`~loadtests.netns.Network`; every process started and stopped by its PID."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from loadtests.netns import Host

ETCD = "/usr/bin/etcd"
ETCDCTL = "/usr/bin/etcdctl"
CLIENT_PORT = 2379
PEER_PORT = 2380
#: Fast failure detection for tests: a dead leader is replaced within ~1-2 s. Pre-vote
#: keeps a member that comes back from isolation from deposing a healthy leader.
TUNING = ("--heartbeat-interval", "100", "--election-timeout", "1000", "--pre-vote")


class EtcdError(RuntimeError):
    """An etcd member or ``etcdctl`` failed; the message carries its output or log."""


def etcd_available() -> str | None:
    """None when the etcd server and client are installed; otherwise why not."""
    for path, package in ((ETCD, "etcd-server"), (ETCDCTL, "etcd-client")):
        if not os.access(path, os.X_OK):
            return f"{path} is missing (apt-get install {package})"
    return None


def _free_ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports (all held open until every one is chosen)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]


@dataclass(slots=True)
class _Member:
    name: str
    client: str  # "IP:PORT"
    peer: str
    data_dir: Path
    log_path: Path
    host: Host | None
    proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class EtcdCluster:
    """A static etcd cluster: members ``m0..m{n-1}``, data dirs ``root/m<i>``, logs
    ``root/m<i>.log``. With ``hosts``, member i runs in ``hosts[i]``'s namespace on its
    address (ports 2379/2380) and ``size`` is ``len(hosts)``; without, ``size`` members
    run on 127.0.0.1 with free ports. Entering the context starts it if not started."""

    def __init__(self, root: Path, hosts: Sequence[Host] | None = None, size: int = 3) -> None:
        self.root = root
        self.token = f"squall-test-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        places: list[tuple[Host | None, str, str]]
        if hosts is not None:
            if not hosts:
                raise ValueError("an etcd cluster needs at least one host")
            places = [(h, f"{h.address}:{CLIENT_PORT}", f"{h.address}:{PEER_PORT}")
                      for h in hosts]
        else:
            if size < 1:
                raise ValueError("an etcd cluster needs at least one member")
            ports = _free_ports(2 * size)
            places = [(None, f"127.0.0.1:{ports[2 * i]}", f"127.0.0.1:{ports[2 * i + 1]}")
                      for i in range(size)]
        self._members = [_Member(f"m{i}", client, peer, root / f"m{i}", root / f"m{i}.log", h)
                         for i, (h, client, peer) in enumerate(places)]
        self._ids: dict[int, int] = {}  # raft member ID -> index
        self._started = False
        self._closed = False

    def __enter__(self) -> Self:
        if not self._started:
            self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def size(self) -> int:
        return len(self._members)

    @property
    def endpoints(self) -> list[str]:
        """The members' client addresses, ``IP:PORT``."""
        return [m.client for m in self._members]

    @property
    def url(self) -> str:
        """``etcd://IP:PORT,IP:PORT,...``: every member's client endpoint."""
        return "etcd://" + ",".join(self.endpoints)

    def pid(self, i: int) -> int | None:
        """Member i's PID while it runs."""
        m = self._members[i]
        return m.proc.pid if m.proc is not None and m.running else None

    def running(self, i: int) -> bool:
        return self._members[i].running

    def _launch(self, i: int, state: str) -> None:
        m = self._members[i]
        if m.running:
            raise EtcdError(f"member {i} is already running")
        cluster = ",".join(f"{o.name}=http://{o.peer}" for o in self._members)
        argv = [ETCD, "--name", m.name, "--data-dir", str(m.data_dir),
                "--listen-client-urls", f"http://{m.client}",
                "--advertise-client-urls", f"http://{m.client}",
                "--listen-peer-urls", f"http://{m.peer}",
                "--initial-advertise-peer-urls", f"http://{m.peer}",
                "--initial-cluster", cluster, "--initial-cluster-state", state,
                "--initial-cluster-token", self.token, *TUNING,
                "--logger", "zap", "--log-outputs", "stderr"]
        self.root.mkdir(parents=True, exist_ok=True)
        with open(m.log_path, "ab") as log:
            kwargs: dict[str, Any] = {"stdin": subprocess.DEVNULL, "stdout": log,
                                      "stderr": subprocess.STDOUT}
            m.proc = m.host.popen(argv, **kwargs) if m.host else subprocess.Popen(argv, **kwargs)

    def start(self, timeout: float = 30.0) -> Self:
        """Launch every member (a new cluster) and wait until it has a leader and takes a
        write; on failure, stop everything and raise :class:`EtcdError` with the logs."""
        if self._closed:
            raise EtcdError("the cluster is closed")
        if self._started:
            return self
        self._started = True
        deadline = time.monotonic() + timeout
        try:
            for i in range(self.size):
                self._launch(i, "new")
            while True:
                self._check_alive()
                key = f"__squall_test_ready_{uuid.uuid4().hex}"
                if self.etcdctl("put", key, "1", timeout=2, check=False).returncode == 0:
                    self.etcdctl("del", key, timeout=5)
                    self.wait_leader(max(1.0, deadline - time.monotonic()))
                    return self
                if time.monotonic() > deadline:
                    raise EtcdError(f"etcd took no write within {timeout}s:\n{self._logs()}")
                time.sleep(0.1)
        except BaseException:
            self.close()
            raise

    def _check_alive(self) -> None:
        for i, m in enumerate(self._members):
            if m.proc is not None and m.proc.poll() is not None:
                raise EtcdError(f"member {i} exited with {m.proc.returncode}:\n{self.log(i)}")

    def etcdctl(self, *args: str, member: int | None = None, host: Host | None = None,
                timeout: float = 10.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``etcdctl args`` against member ``member``'s endpoint, or every endpoint when
        None; in ``host``'s namespace, by default that member's (the first member's when
        None; the root namespace on loopback). ``check``: raise :class:`EtcdError` on
        failure (a timeout is a failure with return code -1)."""
        endpoints = self.endpoints if member is None else [self.endpoints[member]]
        where = host or self._members[member or 0].host
        argv = [ETCDCTL, f"--endpoints={','.join(endpoints)}", "--dial-timeout=2s",
                f"--command-timeout={timeout}s", *args]
        kwargs: dict[str, Any] = {"capture_output": True, "text": True,
                                  "env": {**os.environ, "ETCDCTL_API": "3"},
                                  "timeout": timeout + 5}
        try:
            done: subprocess.CompletedProcess[str] = (
                where.run(argv, check=False, **kwargs) if where
                else subprocess.run(argv, check=False, **kwargs))
        except subprocess.TimeoutExpired:
            done = subprocess.CompletedProcess(argv, -1, "", f"timed out after {timeout + 5}s")
        if check and done.returncode != 0:
            raise EtcdError(f"etcdctl {' '.join(args)} failed ({done.returncode}): "
                            f"{done.stderr.strip()}")
        return done

    def _status(self, i: int) -> tuple[int, int] | None:
        """Member i's own (ID, leader ID) as it reports them, or None."""
        if not self._members[i].running:
            return None
        done = self.etcdctl("endpoint", "status", "-w", "json", member=i, timeout=1,
                            check=False)
        try:
            status = json.loads(done.stdout)[0]["Status"]
            return int(status["header"]["member_id"]), int(status["leader"])
        except (ValueError, LookupError, TypeError):
            return None

    def _leader_once(self, excluding: Collection[int]) -> int | None:
        """The member that says it leads and that a majority of members agree on."""
        with ThreadPoolExecutor(self.size) as pool:
            reports = list(pool.map(self._status, range(self.size)))
        for i, report in enumerate(reports):
            if report is not None:
                self._ids[report[0]] = i
        votes: dict[int, int] = {}
        for report in reports:
            if report is not None and report[1] != 0:
                votes[report[1]] = votes.get(report[1], 0) + 1
        for leader_id, count in votes.items():
            index = self._ids.get(leader_id)
            own = reports[index] if index is not None else None
            if (count > self.size // 2 and own is not None and own[1] == leader_id
                    and index not in excluding):
                return index
        return None

    def wait_leader(self, timeout: float = 10.0, *, excluding: Collection[int] = ()) -> int:
        """The index of the leader, waiting out an election for up to ``timeout``;
        ``excluding``: wait for a leader other than these (just after cutting a leader
        off, the others still follow it until their election timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            found = self._leader_once(excluding)
            if found is not None:
                return found
            if time.monotonic() > deadline:
                raise EtcdError(f"no leader within {timeout}s:\n{self._logs()}")
            time.sleep(0.1)

    def leader(self, timeout: float = 10.0) -> int:
        """The index of the current leader (``etcdctl endpoint status`` of every running
        member, in its namespace), retrying while an election goes on."""
        return self.wait_leader(timeout)

    def kill(self, i: int) -> None:
        """SIGKILL member i by its PID (a crash) and reap it."""
        proc = self._members[i].proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def stop(self, i: int, timeout: float = 10.0) -> None:
        """SIGTERM member i by its PID and wait; SIGKILL after ``timeout``."""
        proc = self._members[i].proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def restart(self, i: int, timeout: float = 30.0) -> None:
        """Start member i again on its data dir (``--initial-cluster-state existing``) and
        wait until it follows a leader."""
        self._launch(i, "existing")
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            report = self._status(i)
            if report is not None and report[1] != 0:
                return
            if time.monotonic() > deadline:
                raise EtcdError(f"member {i} did not rejoin within {timeout}s:\n{self.log(i)}")
            time.sleep(0.1)

    def log(self, i: int, chars: int = 5000) -> str:
        """The tail of member i's log."""
        try:
            return self._members[i].log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def _logs(self) -> str:
        return "\n".join(f"--- m{i}\n{self.log(i, 2000)}" for i in range(self.size))

    def close(self) -> None:
        """SIGKILL every member still running, by PID, and reap it (a graceful SIGTERM
        to all costs seconds: a leader first tries to hand over to stopping followers).
        Idempotent."""
        if self._closed:
            return
        self._closed = True
        for i in range(self.size):
            self.kill(i)


class EtcdServer(EtcdCluster):
    """One etcd member on 127.0.0.1 with free ports."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, size=1)

    def kill(self, i: int = 0) -> None:
        super().kill(i)

    def stop(self, i: int = 0, timeout: float = 10.0) -> None:
        super().stop(i, timeout)

    def restart(self, i: int = 0, timeout: float = 30.0) -> None:
        super().restart(i, timeout)
