"""The pieces of ``--workers N`` that need no server: settings, layout, metrics merge."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cache.index import Index
from gateway.credentials import Credentials
from gateway.settings import Settings, load_settings
from gateway.workers import layout, plan
from gateway.workers.front import merge_metrics
from gateway.workers.links import Answer

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


@pytest.mark.parametrize(("overrides", "message"), [
    ({"peers": "http://a:1,http://b:1"}, "cannot be combined with --peers"),
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
