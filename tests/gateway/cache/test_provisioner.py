"""LocalProvisioner: volumes as directories, found again after a crash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.cache.provisioner import (
    MARKER,
    LocalProvisioner,
    Provisioner,
    ProvisionError,
)

MiB = 1 << 20


async def test_attach_list_detach(tmp_path: Path) -> None:
    prov = LocalProvisioner(tmp_path / "vols", clock=lambda: 1234.5)
    assert isinstance(prov, Provisioner)
    assert await prov.list() == []
    a = await prov.attach(8 * MiB, 64e6)
    b = await prov.attach(4 * MiB, None)
    assert (a.id, b.id) == ("vol-1", "vol-2")
    assert a.path == tmp_path / "vols" / "vol-1" and a.path.is_dir()
    assert (a.size_bytes, a.bandwidth_bytes_per_s, a.attached_at) == (8 * MiB, 64e6, 1234.5)
    assert json.loads((a.path / MARKER).read_text())["format"] == "squall-local-volume"
    assert await prov.list() == [a, b]  # what a restarted gateway finds
    await prov.detach(a)
    assert not a.path.exists()
    assert await prov.list() == [b]
    c = await prov.attach(MiB, None)
    assert c.id == "vol-3"  # numbers are not reused while a later volume exists


async def test_interrupted_attach_and_detach_are_cleaned_up(tmp_path: Path) -> None:
    prov = LocalProvisioner(tmp_path)
    (tmp_path / ".vol-7.attaching").mkdir()
    (tmp_path / ".vol-3.detaching" / "data").mkdir(parents=True)
    assert await prov.list() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # noqa: ASYNC240  a test


async def test_bad_requests_and_bad_markers(tmp_path: Path) -> None:
    prov = LocalProvisioner(tmp_path)
    with pytest.raises(ProvisionError, match="size > 0"):
        await prov.attach(0, None)
    with pytest.raises(ProvisionError, match="bandwidth"):
        await prov.attach(MiB, 0)
    with pytest.raises(ProvisionError, match="bytes free"):
        await prov.attach(1 << 60, None)
    (tmp_path / "vol-1").mkdir()
    with pytest.raises(ProvisionError, match="no readable"):
        await prov.list()
    (tmp_path / "vol-1" / MARKER).write_text(json.dumps({"format": "other", "version": 1}))
    with pytest.raises(ProvisionError, match="unsupported format"):
        await prov.list()
    (tmp_path / "vol-1" / MARKER).write_text(json.dumps(
        {"format": "squall-local-volume", "version": 1, "id": "vol-1"}))
    with pytest.raises(ProvisionError, match="malformed"):
        await prov.list()
