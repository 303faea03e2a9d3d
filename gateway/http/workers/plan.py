"""What each worker of ``squall serve --workers N`` runs: its settings, derived once.

Worker ``k`` is cluster member ``k`` of a ring of N synthetic members named
``http://worker-<k>`` (names for the rendezvous hash, the peer marker and logs; the
traffic goes to Unix sockets). With ``--peers`` or ``--coordinator`` (every host running
N workers), it is worker ``k`` of its host in the ring of the hosts' workers: the
cluster's settings pass unchanged, the worker registers (or finds itself) as
``<host URL>/worker-<k>``. It keeps its cache under ``<data-dir>/worker-<k>`` and
shares the backend and the credentials. What is a budget for the whole gateway (cache
capacity, backend throttle) is divided between the workers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gateway.auth.credentials import Credentials
from gateway.cache.settings import CacheVolumeSettings
from gateway.config.settings import Settings
from gateway.http.workers.host import single_host
from gateway.http.workers.layout import worker_dir


def check(settings: Settings) -> None:
    """ValueError for what ``--workers N`` (N > 1) cannot run."""
    refusal = settings.workers_refusal()
    if refusal:
        raise ValueError(refusal)


def volumes(settings: Settings) -> list[Path]:
    """The cache volume directories of every worker (kept by a layout change)."""
    count = settings.workers
    paths: list[Path] = []
    for k in range(count):
        derived = worker_settings(settings, k, Credentials("-", "-" * 16), "-" * 16)
        if derived.cache_volumes is not None:
            paths += [v.path for v in derived.cache_volumes]
        paths.append(derived.cache_dir or derived.data_dir / "cache")
        if derived.cache_volume_root is not None:
            paths.append(derived.cache_volume_root)
    return paths


def worker_settings(settings: Settings, index: int, credentials: Credentials,
                    secret: str) -> Settings:
    """The settings of worker ``index`` of ``settings.workers``."""
    count = settings.workers
    spec = settings.backend_spec  # resolved against the parent's data dir
    tag = f"worker-{index}"
    update: dict[str, Any] = {
        "data_dir": worker_dir(settings.data_dir, index),
        "users_file": settings.users_path,  # one file for all workers
        "backend": f"{spec.kind}:{spec.args}",
        "access_key": credentials.access_key,
        "secret_key": credentials.secret_key,
        "cluster_secret": settings.cluster_secret or secret,
    }
    if not settings.peers and not settings.coordinator:
        update |= {"peers": [single_host(k) for k in range(count)], "node_id": index,
                   "dirty_replicas": 1}  # the workers of one host: a copy shares its fate
    if settings.cache_dir is not None:
        update["cache_dir"] = settings.cache_dir / tag
    if settings.cache_volume_root is not None:
        update["cache_volume_root"] = settings.cache_volume_root / tag
    if settings.cache_volumes is not None:
        update["cache_volumes"] = [
            CacheVolumeSettings(path=v.path / tag, capacity_bytes=v.capacity_bytes // count)
            for v in settings.cache_volumes]
    update["cache_size"] = settings.cache_size // count
    if settings.cache_max_size is not None:
        update["cache_max_size"] = settings.cache_max_size // count
    if settings.backend_bandwidth is not None:
        update["backend_bandwidth"] = settings.backend_bandwidth / count
    if settings.backend_bandwidth_estimate is not None:
        update["backend_bandwidth_estimate"] = settings.backend_bandwidth_estimate / count
    if settings.backend_iops is not None:
        update["backend_iops"] = settings.backend_iops / count
    return Settings(**{**settings.model_dump(), **update})
