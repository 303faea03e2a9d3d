"""Cluster settings from flags, environment and config file; clear errors otherwise."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway.cluster.settings import cluster_settings, find_self
from gateway.settings import load_settings
from gateway.settings_sources import SettingsError
from tests.gateway.test_cli import run_cli

PEERS = "http://127.0.0.1:9100,http://127.0.0.1:9101,http://127.0.0.1:9102"
SECRET = "s" * 16


def test_peers_from_flag_environment_and_file(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings(peers=PEERS).peers == PEERS.split(",")
    monkeypatch.setenv("SQUALL_PEERS", "http://A:1, http://b:2")
    monkeypatch.setenv("SQUALL_NODE_ID", "1")
    settings = load_settings()
    assert settings.peers == ["http://a:1", "http://b:2"] and settings.node_id == 1
    monkeypatch.delenv("SQUALL_PEERS")
    config = tmp_path / "squall.toml"
    config.write_text('peers = ["http://x:1", "http://y:1"]\ncluster_secret = "abc"\n')
    settings = load_settings(config)
    assert settings.peers == ["http://x:1", "http://y:1"]
    assert settings.cluster_secret == "abc"
    assert load_settings().peers == []


def test_bad_peer_lists() -> None:
    with pytest.raises(SettingsError, match="--peers: peer URL"):
        load_settings(peers="http://a:1,squall-1:9000")
    with pytest.raises(SettingsError, match="more than once"):
        load_settings(peers="http://a:1,http://A:1/")


def test_cluster_settings() -> None:
    assert cluster_settings([], None, None) is None
    made = cluster_settings(PEERS.split(","), 2, SECRET)
    assert made is not None and made.ring.self_index == 2 and made.secret == SECRET.encode()
    solo = cluster_settings(["http://127.0.0.1:9100"], 0, None)
    assert solo is not None and len(solo.ring.members) == 1


@pytest.mark.parametrize("peers,node_id,secret,message", [
    (PEERS, 0, None, "--cluster-secret (SQUALL_CLUSTER_SECRET) is required"),
    (PEERS, 3, SECRET, "--node-id 3 is not an index into the 3 peers (0..2)"),
    (PEERS, 0, "short", "at least 16 characters"),
    ("", 1, None, "--node-id needs --peers"),
])
def test_inconsistent_cluster_settings(peers: str, node_id: int, secret: str | None,
                                       message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        cluster_settings([p for p in peers.split(",") if p], node_id, secret)


def test_node_found_by_host_name() -> None:
    members = [f"http://squall-{i}.squall-headless.ns.svc.cluster.local:9000"
               for i in range(3)]
    assert find_self(members, ["squall-1"]) == 1
    assert find_self(members, ["squall-2.squall-headless.ns.svc.cluster.local"]) == 2
    with pytest.raises(ValueError, match="pass --node-id"):
        find_self(members, ["laptop", "laptop.local"])
    with pytest.raises(ValueError, match="pass --node-id"):
        find_self(["http://127.0.0.1:1", "http://127.0.0.1:2"], ["127"])


def test_cli_errors(tmp_path: Path) -> None:
    result = run_cli("serve", "--data-dir", str(tmp_path / "d"), "--peers", PEERS,
                     "--node-id", "0")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--cluster-secret (SQUALL_CLUSTER_SECRET) is required" in result.stderr
    result = run_cli("serve", "--data-dir", str(tmp_path / "d"), "--peers", PEERS)
    assert result.returncode == 2 and "pass --node-id K" in result.stderr
    result = run_cli("serve", "--data-dir", str(tmp_path / "d"), "--peers", "nonsense")
    assert result.returncode == 2 and "squall: --peers: " in result.stderr


def test_dirty_replicas_default_and_bounds() -> None:
    members = PEERS.split(",")
    made = cluster_settings(members, 0, SECRET)
    assert made is not None and made.dirty_replicas == 2
    solo = cluster_settings(members[:1], 0, None)
    assert solo is not None and solo.dirty_replicas == 1
    three = cluster_settings(members, 0, SECRET, dirty_replicas=3)
    assert three is not None and three.dirty_replicas == 3
    for bad in (0, 4):
        with pytest.raises(ValueError, match="--dirty-replicas must be between 1 and"):
            cluster_settings(members, 0, SECRET, dirty_replicas=bad)
    with pytest.raises(ValueError, match="--dirty-replicas above 1 needs --peers"):
        cluster_settings([], None, None, dirty_replicas=2)
    assert load_settings(dirty_replicas=1).dirty_replicas == 1


def test_a_member_file_lists_the_members(tmp_path: Path) -> None:
    members = tmp_path / "members"
    members.write_text("# the StatefulSet's pods\nhttp://A:1, http://b:1\n\nhttp://c:1 # new\n")
    settings = cluster_settings([], 2, SECRET, peers_file=members)
    assert settings is not None and settings.peers_file == members
    assert settings.ring.members == ("http://a:1", "http://b:1", "http://c:1")
    with pytest.raises(ValueError, match="give --peers or --peers-file, not both"):
        cluster_settings(["http://a:1"], 0, SECRET, peers_file=members)
    with pytest.raises(ValueError, match="No such file"):
        cluster_settings([], 0, SECRET, peers_file=tmp_path / "missing")
    members.write_text("http://a:1\n")  # one pod: copies once a second member joins
    alone = cluster_settings([], 0, SECRET, peers_file=members)
    assert alone is not None and alone.dirty_replicas == 2
    members.write_text("# nobody yet\n")
    with pytest.raises(ValueError, match="lists no member"):
        cluster_settings([], 0, SECRET, peers_file=members)
