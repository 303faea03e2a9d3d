"""The pieces of ``--workers N`` that need no server: settings, layout, metrics merge."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.auth.credentials import Credentials
from gateway.cache.entry import Upload
from gateway.cache.index import Batch, Index
from gateway.config.cores import usable_cores
from gateway.config.settings import Settings, auto_worker_count, load_settings
from gateway.http.workers import layout, plan
from gateway.http.workers.front import merge_metrics
from gateway.http.workers.links import Answer

CREDS = Credentials("AK", "a-secret-key-of-24-chars")


def test_worker_settings_share_the_backend_and_split_the_budgets(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path, workers=2, cache_size="1GiB",
                             backend_bandwidth="20MiB/s", backend_iops=100.0,
                             cache_dir=tmp_path / "fast")
    derived = plan.worker_settings(settings, 1, CREDS, "s" * 16)
    assert derived.data_dir == tmp_path / "worker-1"
    assert derived.backend == f"posix:{tmp_path / 'objects'}"
    assert derived.cache_dir == tmp_path / "fast" / "worker-1"
    assert derived.cache_size == 2**29
    assert derived.backend_bandwidth == 10 * 2**20
    assert derived.backend_iops == 50.0
    assert derived.peers == ["http://worker-0", "http://worker-1"]
    assert derived.node_id == 1
    assert (derived.access_key, derived.secret_key) == ("AK", "a-secret-key-of-24-chars")
    # What the parent sends a worker (JSON) reads back as the same settings.
    assert Settings(**derived.model_dump(mode="json")) == derived


def test_workers_of_a_cluster_keep_its_settings(tmp_path: Path) -> None:
    """With --peers, the workers are members of the hosts' ring (made by the worker):
    the cluster's list, node id, copies and secret pass unchanged."""
    settings = load_settings(data_dir=tmp_path, workers=2, peers="http://a:1,http://b:1",
                             node_id="1", dirty_replicas="2", cluster_secret="c" * 20)
    assert settings.workers_refusal() is None
    derived = plan.worker_settings(settings, 1, CREDS, "s" * 16)
    assert derived.peers == ["http://a:1", "http://b:1"]
    assert (derived.node_id, derived.dirty_replicas) == (1, 2)
    assert derived.cluster_secret == "c" * 20
    assert derived.data_dir == tmp_path / "worker-1"


@pytest.mark.parametrize(("overrides", "message"), [
    ({"node_id": "1"}, "--node-id needs --peers"),
    ({"backend": "blobseer_like:/a,/b"}, "one process at a time"),
])
def test_what_workers_cannot_run(tmp_path: Path, overrides: dict[str, str],
                                 message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plan.check(load_settings(data_dir=tmp_path, workers=2, **overrides))


def test_layout_is_recorded_and_unchanged_starts_do_nothing(tmp_path: Path) -> None:
    layout.prepare(tmp_path, 1)
    assert not (tmp_path / layout.MARKER).exists()  # one process: as before
    layout.prepare(tmp_path, 3)
    assert layout.recorded_workers(tmp_path) == 3
    layout.prepare(tmp_path, 3)
    assert layout.recorded_workers(tmp_path) == 3


def test_clean_caches_of_another_layout_are_removed(tmp_path: Path) -> None:
    Index(tmp_path / "index").close()  # a clean one-process cache
    (tmp_path / "cache").mkdir()
    layout.prepare(tmp_path, 2)
    assert not (tmp_path / "index").exists() and not (tmp_path / "cache").exists()
    for k in range(2):
        Index(layout.worker_dir(tmp_path, k) / "index").close()
    layout.prepare(tmp_path, 1)
    assert not layout.worker_dir(tmp_path, 0).exists()
    assert layout.recorded_workers(tmp_path) is None


def test_volumes_in_use_are_kept(tmp_path: Path) -> None:
    Index(tmp_path / "index").close()
    (tmp_path / "cache").mkdir()
    layout.prepare(tmp_path, 2, keep=[tmp_path / "cache" / "worker-0"])
    assert (tmp_path / "cache").exists() and not (tmp_path / "index").exists()


def test_a_damaged_marker_is_an_error(tmp_path: Path) -> None:
    (tmp_path / layout.MARKER).write_text("{}")
    with pytest.raises(layout.LayoutError, match="unknown format"):
        layout.prepare(tmp_path, 2)


def test_metrics_of_every_worker_in_one_exposition() -> None:
    one = (b"# HELP squall_x_total x\n# TYPE squall_x_total counter\n"
           b'squall_x_total{op="get"} 3.0\n')
    two = b'# HELP squall_x_total x\n# TYPE squall_x_total counter\nsquall_x_total{op="get"} 4.0\n'
    text = merge_metrics([Answer(200, one), Answer(200, two), Answer(0, error="down")]).decode()
    assert 'squall_x_total{op="get",worker="0"} 3.0' in text
    assert 'squall_x_total{op="get",worker="1"} 4.0' in text
    assert text.count("# TYPE squall_x_total counter") == 1
    assert 'squall_worker_up{worker="2"} 0.0' in text


@pytest.mark.parametrize(("cores", "workers"), [(1, 1), (2, 1), (3, 3), (8, 8), (64, 8)])
def test_auto_runs_one_worker_per_core_from_three_cores(cores: int, workers: int) -> None:
    assert auto_worker_count(cores) == workers


def test_auto_is_the_default_and_resolves_to_a_count(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path)
    assert settings.workers_auto
    assert settings.workers == auto_worker_count(usable_cores())
    chosen = load_settings(data_dir=tmp_path, workers="AUTO")
    assert chosen.workers_auto and chosen.workers == settings.workers
    assert not load_settings(data_dir=tmp_path, workers=2).workers_auto


@pytest.mark.parametrize("overrides", [
    {"backend": "blobseer_like:/a,/b"},
])
def test_auto_is_one_process_where_workers_cannot_run(tmp_path: Path,
                                                      overrides: dict[str, str]) -> None:
    settings = load_settings(data_dir=tmp_path, **overrides)
    assert settings.workers_auto and settings.workers == 1
    assert settings.workers_refusal()


def test_auto_is_one_process_in_a_cluster(tmp_path: Path) -> None:
    """Members must agree on the count: with --peers it is chosen (--workers N)."""
    settings = load_settings(data_dir=tmp_path, peers="http://a:1,http://b:1", node_id="0",
                             cluster_secret="x" * 20)
    assert settings.workers_auto and settings.workers == 1
    assert settings.workers_refusal() is None


def _unflushed_worker_caches(data_dir: Path, workers: int) -> None:
    """The layout of ``workers`` workers whose caches hold one write not on the backend."""
    layout.prepare(data_dir, workers)
    for k in range(workers):
        index = Index(layout.worker_dir(data_dir, k) / "index")
        index.write(Batch().put_upload(Upload(f"upload-{k}", "bucket", "key", 0.0)), sync=True)
        index.close()


def test_auto_keeps_a_count_whose_caches_hold_writes(tmp_path: Path) -> None:
    assert layout.count_for_auto(tmp_path, 4) == 4  # a fresh directory
    _unflushed_worker_caches(tmp_path, 2)
    assert layout.count_for_auto(tmp_path, 4) == 2
    assert layout.count_for_auto(tmp_path, 1) == 2
    assert layout.count_for_auto(tmp_path, 2) == 2


def test_auto_changes_the_count_of_clean_caches(tmp_path: Path) -> None:
    Index(tmp_path / "index").close()  # a clean one-process cache
    assert layout.count_for_auto(tmp_path, 3) == 3


def test_auto_is_one_process_for_cluster_members(tmp_path: Path) -> None:
    """Members agree on the count: it is chosen (--workers N), not guessed per machine."""
    for overrides in ({"coordinator": "etcd://169.254.0.1:2379"},
                      {"peers": "http://a:1,http://b:1", "node_id": "0"}):
        settings = load_settings(data_dir=tmp_path, **overrides)
        assert settings.workers_auto and settings.workers == 1
        assert settings.workers_refusal() is None
