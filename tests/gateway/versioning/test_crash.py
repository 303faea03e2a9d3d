"""SIGKILL the gateway while versioned keys are overwritten and deleted: no acknowledged
version is lost, and every key keeps exactly one latest version."""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_client
from tests.support.server import SquallProcess

KEYS = ["ckpt/a", "ckpt/b", "plain"]


def _writer(s3: Any, key: str, acked: list[tuple[str, bytes | None]],
            stop: threading.Event) -> None:
    """Overwrite ``key`` (and now and then delete it) until the server dies."""
    rng = random.Random(key)
    while not stop.is_set():
        try:
            if rng.random() < 0.2:
                marker = s3.delete_object(Bucket="ver", Key=key)["VersionId"]
                acked.append((marker, None))
            else:
                body = os.urandom(rng.randrange(1, 200_000))
                acked.append((s3.put_object(Bucket="ver", Key=key, Body=body)["VersionId"],
                              body))
        except Exception:  # noqa: BLE001 - the kill interrupts the request in flight
            return


def _check(s3: Any, acked: dict[str, list[tuple[str, bytes | None]]]) -> None:
    versions: list[dict[str, Any]] = []
    for page in s3.get_paginator("list_object_versions").paginate(Bucket="ver"):
        versions += [{**v, "marker": False} for v in page.get("Versions", [])]
        versions += [{**m, "marker": True} for m in page.get("DeleteMarkers", [])]
    for key, history in acked.items():
        mine = [v for v in versions if v["Key"] == key]
        assert sum(v["IsLatest"] for v in mine) == (1 if mine else 0), key
        ids = {v["VersionId"]: v for v in mine}
        for version_id, body in history:
            assert version_id in ids, (key, version_id)
            assert ids[version_id]["marker"] is (body is None)
            if body is not None:
                got = s3.get_object(Bucket="ver", Key=key, VersionId=version_id)
                assert got["Body"].read() == body
        if history:
            latest = next(v for v in mine if v["IsLatest"])
            ordered = sorted(ids)  # ids sort by time: the latest is the newest
            assert latest["VersionId"] == ordered[-1]


@pytest.mark.parametrize("cache", [["--cache-size", "0"], []], ids=["posix", "cache"])
def test_kill_during_versioned_overwrites(tmp_path: Path, cache: list[str]) -> None:
    data = tmp_path / "data"
    server = SquallProcess(data, cache).start()
    s3 = make_client(server.endpoint)
    s3.create_bucket(Bucket="ver")
    s3.put_bucket_versioning(Bucket="ver", VersioningConfiguration={"Status": "Enabled"})
    acked: dict[str, list[tuple[str, bytes | None]]] = {k: [] for k in KEYS}
    rng = random.Random(7)
    for _ in range(2):
        stop = threading.Event()
        writers = [threading.Thread(target=_writer, args=(s3, k, acked[k], stop))
                   for k in KEYS]
        for w in writers:
            w.start()
        time.sleep(rng.uniform(0.3, 0.8))
        server.kill()
        stop.set()
        for w in writers:
            w.join(30)
        server = SquallProcess(data, cache, port=server.port).start()
        s3 = make_client(server.endpoint)
        _check(s3, acked)
    assert sum(len(h) for h in acked.values()) > 10
    assert server.stop() == 0
