"""A distributed, erasure-coded MinIO: N nodes x M drives, each node in a network
namespace of its own (its address exists only there) and a private mount namespace.

MinIO refuses loopback endpoints in distributed mode, and every node must find its drives
at the same path: node ``i`` runs ``unshare -m`` with its own directory
``<work>/node<i>`` bind-mounted at the common path ``<work>/drives`` (drives
``<work>/drives/d1..dM``). A ``client`` namespace on the same bridge is where clients (a
Squall gateway, boto3) run. Every process is stopped by its PID and the namespaces are
removed by :meth:`MinioCluster.stop`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from loadtests.minio.install import INSTALL_HINT, find_minio
from loadtests.minio.single import minio_env
from loadtests.netns import Host, Network, tool

PORT = 9000
HEALTH = "/minio/health/cluster"  # 200 once the node has write quorum


#: the namespaces' names and subnets (apart from the test suite's networks)
SCHEME = "squall-m-"
SUBNETS = range(1, 128)  # 169.254.1-127.0/24 (the tests take 128-254)


def unavailable() -> str | None:
    """Why the cluster cannot be built here (a skip reason), or None."""
    if os.geteuid() != 0:
        return "network and mount namespaces need root"
    for name, package in (("ip", "iproute2"), ("unshare", "util-linux")):
        if shutil.which(tool(name)) is None:
            return f"`{name}` is missing (apt-get install {package})"
    return None


class ClusterFailed(RuntimeError):
    """A node exited or the cluster did not become healthy (log tails in the message)."""


class MinioCluster:
    """``nodes`` MinIO servers with ``drives`` drives each; use as a context manager or
    call :meth:`start` and :meth:`stop`."""

    def __init__(self, work: Path, access_key: str, secret_key: str, *, nodes: int = 4,
                 drives: int = 2, faults: bool = False) -> None:
        """``faults``: every namespace gets the nftables table that ``network.cut`` fills
        (needs nft), so tests can cut links."""
        binary = find_minio()
        if binary is None:
            raise FileNotFoundError(f"minio not found ({INSTALL_HINT})")
        self.binary = binary
        self.work = work.resolve()
        self.access_key, self.secret_key = access_key, secret_key
        self.node_count, self.drive_count = nodes, drives
        self.faults = faults
        self.network: Network | None = None
        self.nodes: list[Host] = []
        self.client: Host | None = None
        self.procs: list[subprocess.Popen[Any] | None] = []

    @property
    def endpoints(self) -> list[str]:
        return [f"http://{host.address}:{PORT}" for host in self.nodes]

    @property
    def endpoint(self) -> str:
        """The first node's S3 endpoint (any node serves the whole cluster)."""
        return self.endpoints[0]

    def _drives(self) -> str:
        first = self.nodes[0].address.rsplit(".", 1)
        last = int(first[1]) + self.node_count - 1
        return (f"http://{first[0]}.{{{first[1]}...{last}}}:{PORT}"
                f"{self.work / 'drives'}/d{{1...{self.drive_count}}}")

    def _start_node(self, index: int) -> subprocess.Popen[Any]:
        host = self.nodes[index]
        own = self.work / f"node{index + 1}"
        for drive in range(1, self.drive_count + 1):
            (own / f"d{drive}").mkdir(parents=True, exist_ok=True)
        argv = [tool("unshare"), "-m", "--propagation", "private", "sh", "-c",
                'mount --bind "$1" "$2" && shift 2 && exec "$@"', "sh",
                str(own), str(self.work / "drives"),
                self.binary, "server", "--address", f"{host.address}:{PORT}",
                "--console-address", f"{host.address}:{PORT + 1}", "--quiet", self._drives()]
        with open(self.work / f"minio{index + 1}.log", "ab") as log:
            return host.popen(argv, stdout=log, stderr=subprocess.STDOUT,
                              env=minio_env(self.access_key, self.secret_key))

    def start(self, timeout: float = 180.0) -> Self:
        """Build the network, start every node, wait until each reports write quorum."""
        (self.work / "drives").mkdir(parents=True, exist_ok=True)
        self.network = Network(scheme=SCHEME, subnets=SUBNETS, faults=self.faults)
        try:
            self.nodes = [self.network.add_host(f"minio{i + 1}")
                          for i in range(self.node_count)]
            self.client = self.network.add_host("client")
            self.procs = [self._start_node(i) for i in range(self.node_count)]
            if not self.wait_healthy(timeout):
                raise ClusterFailed(f"MinIO not healthy after {timeout:.0f}s\n{self.logs()}")
        except BaseException:
            self.stop()
            raise
        return self

    def wait_healthy(self, timeout: float, nodes: list[int] | None = None) -> bool:
        """Whether the nodes (all by default) report write quorum within ``timeout``."""
        assert self.client is not None
        urls = [self.endpoints[i] + HEALTH for i in (nodes or range(self.node_count))]
        for proc in self.procs:
            if proc is not None and proc.poll() is not None:
                raise ClusterFailed(f"a MinIO node exited with {proc.returncode}\n"
                                    f"{self.logs()}")
        done = self.client.run([sys.executable, "-m", "loadtests.minio.probe", str(timeout),
                                *urls], env=self.client_env(), check=False)
        return done.returncode == 0

    def client_env(self) -> dict[str, str]:
        """The environment of a process in the client namespace: this checkout importable."""
        root = str(Path(__file__).resolve().parents[2])
        path = os.environ.get("PYTHONPATH")
        return {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{path}" if path else root}

    def cut_client(self) -> None:
        """Drop every packet between the client namespace and every node, open
        connections too (needs ``faults``)."""
        assert self.network is not None and self.client is not None
        for node in self.nodes:
            self.network.cut(self.client, node)

    def heal_client(self) -> None:
        """Undo :meth:`cut_client`."""
        assert self.network is not None and self.client is not None
        self.network.heal(self.client)

    def kill(self, index: int) -> None:
        """SIGKILL node ``index`` (from 0) by its PID, as a crash would."""
        proc = self.procs[index]
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def restart(self, index: int, timeout: float = 180.0) -> None:
        """Start node ``index`` again (after :meth:`kill`) on its address and drives; wait
        until every node reports write quorum."""
        proc = self.procs[index]
        if proc is not None and proc.poll() is None:
            raise ClusterFailed(f"node {index + 1} is still running")
        self.procs[index] = self._start_node(index)
        if not self.wait_healthy(timeout):
            raise ClusterFailed(f"MinIO not healthy {timeout:.0f}s after node {index + 1} "
                                f"restarted\n{self.logs()}")

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM every node by its PID (SIGKILL if it lingers), remove the namespaces."""
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            if proc is None:
                continue
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs = []
        if self.network is not None:
            self.network.close()
            self.network = None

    def logs(self, lines: int = 15) -> str:
        tails = []
        for i in range(self.node_count):
            path = self.work / f"minio{i + 1}.log"
            text = path.read_text(errors="replace") if path.exists() else ""
            tails.append(f"--- {path.name}\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(tails)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
