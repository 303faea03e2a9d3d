"""Cluster settings from flags, environment and config file; clear errors otherwise."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway.cluster.coordinator.settings import coordinator_settings
from gateway.cluster.settings import cluster_settings, find_self
from gateway.config.settings import load_settings
from gateway.config.sources import SettingsError
from tests.gateway.commands.test_cli import run_cli

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


def test_dirty_replicas_need_a_coordinator() -> None:
    members = PEERS.split(",")
    made = cluster_settings(members, 0, SECRET)
    assert made is not None and made.dirty_replicas == 1
    with pytest.raises(ValueError, match="--dirty-replicas above 1 needs --coordinator"):
        cluster_settings(members, 0, SECRET, dirty_replicas=2)
    with pytest.raises(ValueError, match="--dirty-replicas above 1 needs --coordinator"):
        cluster_settings([], None, None, dirty_replicas=2)
    coordinator = coordinator_settings("etcd://169.254.0.1:2379")
    made = cluster_settings([], None, SECRET, coordinator=coordinator,
                            advertise_url="http://169.254.0.5:9000")
    assert made is not None and made.dirty_replicas == 2 and made.ring is None
    assert made.name == "http://169.254.0.5:9000"
    three = cluster_settings([], None, SECRET, coordinator=coordinator, dirty_replicas=3,
                             advertise_url="http://169.254.0.5:9000", host_worker=(1, 2))
    assert three is not None and three.dirty_replicas == 3
    assert three.name == "http://169.254.0.5:9000/worker-1"
    assert load_settings(dirty_replicas=1).dirty_replicas == 1


@pytest.mark.parametrize("kwargs,message", [
    ({"secret": None}, "--cluster-secret (SQUALL_CLUSTER_SECRET) is required with"),
    ({"peers": ["http://a:1"]}, "give --coordinator (etcd) or a fixed --peers list, not both"),
    ({"advertise_url": None}, "--advertise-url URL"),
])
def test_inconsistent_coordinated_settings(kwargs: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"peers": [], "node_id": None, "secret": SECRET,
                                    "advertise_url": "http://169.254.0.5:9000", **kwargs}
    with pytest.raises(ValueError, match=re.escape(message)):
        cluster_settings(arguments.pop("peers"), arguments.pop("node_id"),  # type: ignore[arg-type]
                         arguments.pop("secret"),  # type: ignore[arg-type]
                         coordinator=coordinator_settings("etcd://169.254.0.1"),
                         **arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize("url,message", [
    ("http://169.254.0.1:2379", "must look like etcd://HOST:PORT"),
    ("etcd://", "names no endpoint"),
    ("etcd://169.254.0.1:x", "bad port"),
    ("etcd://169.254.0.1/path", "is not HOST:PORT"),
])
def test_bad_coordinator_urls(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        coordinator_settings(url)


def test_coordinator_settings() -> None:
    made = coordinator_settings("etcds://a:1,b, c:3", lease_ttl_s=9, user="u", password="p")
    assert made.endpoints == (("a", 1), ("b", 2379), ("c", 3)) and made.tls
    assert made.url == "etcds://a:1,b:2379,c:3" and made.lease_ttl_s == 9
    with pytest.raises(ValueError, match="--etcd-user and --etcd-password go together"):
        coordinator_settings("etcd://a", user="u")
    with pytest.raises(ValueError, match="--lease-ttl must be between 2 and 300"):
        coordinator_settings("etcd://a", lease_ttl_s=1)
    settings = load_settings(coordinator="etcd://169.254.0.1:2379", listen="169.254.0.7:9001",
                             cluster_secret=SECRET)
    assert settings.advertised_url() == "http://169.254.0.7:9001"
    assert load_settings(listen="0.0.0.0:9000").advertised_url() is None
    clustering = settings.clustering()
    assert clustering is not None and clustering.name == "http://169.254.0.7:9001"


def test_cli_errors(tmp_path: Path) -> None:
    result = run_cli("serve", "--data-dir", str(tmp_path / "d"), "--peers", PEERS,
                     "--node-id", "0")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--cluster-secret (SQUALL_CLUSTER_SECRET) is required" in result.stderr
    result = run_cli("serve", "--data-dir", str(tmp_path / "d"), "--peers", PEERS)
    assert result.returncode == 2 and "pass --node-id K" in result.stderr
    result = run_cli("serve", "--data-dir", str(tmp_path / "d"), "--peers", "nonsense")
    assert result.returncode == 2 and "squall: --peers: " in result.stderr
    result = run_cli("serve", "--data-dir", str(tmp_path / "d"), "--coordinator",
                     "etcd://127.0.0.1:1", "--listen", "0.0.0.0:9000")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    result = run_cli("serve", "--data-dir", str(tmp_path / "d"), "--coordinator", "nonsense")
    assert result.returncode == 2 and "must look like etcd://HOST:PORT" in result.stderr
