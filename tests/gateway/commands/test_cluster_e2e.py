"""``squall cluster status`` against a real etcd and real members, and how members stop.

A member that leaves deletes its registration: the revisions the command prints come from
etcd's answer and the members' syncs, so they never go back when members leave. Members
stopped with SIGTERM stop their etcd watch without a stray task error in their log.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.cluster.conftest import Cluster
from tests.support.etcd import EtcdServer

pytestmark = pytest.mark.timeout(240)


def _status(etcd: EtcdServer, cluster: Cluster, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway.commands.cli", "cluster", "status", "--coordinator",
         etcd.url, "--coordinator-prefix", cluster.prefix, *extra],
        capture_output=True, text=True, timeout=60, check=False)


def _state(etcd: EtcdServer, cluster: Cluster) -> dict[str, Any]:
    proc = _status(etcd, cluster, "--json")
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def test_revisions_do_not_go_back_when_members_leave_and_sigterm_logs_no_error(
        tmp_path: Path, etcd: EtcdServer) -> None:
    cluster = Cluster(tmp_path, size=3, coordinator=etcd.url).start()
    try:
        before = _state(etcd, cluster)
        assert len(before["members"]) == 3
        assert before["revision"] >= before["membership_revision"] > 0
        for node in (1, 2):
            assert cluster.nodes[node].stop() == 0
        cluster.wait_members([0])
        after = _state(etcd, cluster)
        assert [m["name"] for m in after["members"]] == [cluster.nodes[0].endpoint]
        # the leaves are newer changes than the registrations that were left
        assert after["revision"] > before["revision"]
        assert after["membership_revision"] > before["membership_revision"]
        assert after["members"][0]["synced"] == after["membership_revision"]
        assert not after["members"][0]["handing_over"]
        text = _status(etcd, cluster)
        assert text.returncode == 0, text.stderr
        assert (f"at etcd revision {after['revision']}, membership revision "
                f"{after['membership_revision']}") in text.stdout.splitlines()[0]
    finally:
        codes = [n.stop() for n in cluster.nodes]
    assert codes == [0, 0, 0]
    for node in cluster.nodes:
        log = node.log()
        assert "never retrieved" not in log, log
        assert "StopAsyncIteration" not in log, log
        assert "Traceback" not in log, log
