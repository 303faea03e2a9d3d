"""Real etcd clusters: on loopback (a leader killed and replaced, a member restarted) and
in network namespaces (a member isolated while the other two keep taking writes)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from loadtests.netns import Host, Network, netns_available
from tests.support.etcd import ETCD, EtcdCluster, EtcdError, EtcdServer, etcd_available

pytestmark = pytest.mark.slow


def _require(netns: bool = False) -> None:
    reason = etcd_available() or (netns_available() if netns else None)
    if reason is not None:
        pytest.skip(reason)


def _get(cluster: EtcdCluster, key: str, member: int | None = None, host: Host | None = None,
         local: bool = False) -> str:
    """The value of ``key``, "" when absent or unreachable; ``local``: a serializable read,
    the member's own copy."""
    done = cluster.etcdctl("get", key, "--print-value-only",
                           *(["--consistency=s"] if local else []), member=member, host=host,
                           timeout=3, check=False)
    return str(done.stdout.strip())


def _eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def test_single_server(tmp_path: Path) -> None:
    _require()
    with EtcdServer(tmp_path) as etcd:
        (endpoint,) = etcd.endpoints
        host, port = endpoint.split(":")
        assert host == "127.0.0.1" and int(port) > 0
        assert etcd.url == f"etcd://{endpoint}"
        etcd.etcdctl("put", "k", "v")
        assert _get(etcd, "k") == "v"
        assert etcd.leader() == 0
        pid = etcd.pid(0)
        assert pid is not None
        etcd.kill()
        assert not etcd.running(0) and etcd.pid(0) is None
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        etcd.restart()
        assert _get(etcd, "k") == "v"  # the data dir survived the crash
    etcd.close()  # idempotent
    assert not etcd.running(0)
    assert "m0" in etcd.log(0)


def test_loopback_cluster_survives_leader_loss_and_rejoins(tmp_path: Path) -> None:
    _require()
    with EtcdCluster(tmp_path, size=3) as etcd:
        assert etcd.url == "etcd://" + ",".join(etcd.endpoints) and len(etcd.endpoints) == 3
        assert len(set(etcd.endpoints)) == 3
        etcd.etcdctl("put", "before", "1")
        assert _get(etcd, "before") == "1"
        old = etcd.leader()
        etcd.kill(old)
        new = etcd.wait_leader(15)
        assert new != old
        etcd.etcdctl("put", "after", "2")
        assert _get(etcd, "after") == "2"
        etcd.restart(old)
        assert etcd.running(old)
        # The restarted member catches up: a serializable read from it alone sees the write.
        _eventually(lambda: _get(etcd, "after", member=old, local=True) == "2")
        assert etcd.leader() in range(3)
        etcd.stop(new)  # SIGTERM: a graceful stop, leadership handed over
        assert not etcd.running(new)
        etcd.wait_leader(15)
        etcd.etcdctl("put", "third", "3")
    with pytest.raises(EtcdError):
        etcd.start()  # closed


def test_cluster_in_namespaces_keeps_a_majority_serving_while_one_is_isolated(
        tmp_path: Path) -> None:
    _require(netns=True)
    with Network() as net:
        members = [net.add_host(f"etcd{i}") for i in range(3)]
        client = net.add_host("client")
        with EtcdCluster(tmp_path, hosts=members) as etcd:
            assert etcd.endpoints == [f"{h.address}:2379" for h in members]
            assert etcd.url == "etcd://" + ",".join(etcd.endpoints)
            # ``ip netns exec`` execs etcd: the PID we signal is etcd's own.
            assert os.readlink(f"/proc/{etcd.pid(0)}/exe") == ETCD
            etcd.etcdctl("put", "k", "v0", host=client)
            assert _get(etcd, "k", host=client) == "v0"
            cut = etcd.leader()
            net.isolate(members[cut])
            rest = [i for i in range(3) if i != cut]
            assert etcd.wait_leader(15, excluding=[cut]) in rest
            for i in rest:
                etcd.etcdctl("put", "k", f"v-{i}", member=i, host=client)
                assert _get(etcd, "k", member=i, host=client) == f"v-{i}"
            # The isolated member takes no write, and the client cannot reach it.
            assert etcd.etcdctl("put", "k", "lost", member=cut, timeout=2,
                                check=False).returncode != 0
            assert etcd.etcdctl("get", "k", member=cut, host=client, timeout=2,
                                check=False).returncode != 0
            net.heal()
            _eventually(lambda: _get(etcd, "k", member=cut, local=True) == f"v-{rest[-1]}",
                        timeout=15)
            assert etcd.leader() in range(3)
