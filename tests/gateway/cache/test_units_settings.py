"""parse_size / parse_rate and the settings models."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from backends.core.units import parse_rate, parse_size
from gateway.cache.settings import CacheSettings, CacheVolumeSettings


@pytest.mark.parametrize(("text", "value"), [
    ("0", 0), ("1", 1), ("1GiB", 1 << 30), ("1gib", 1 << 30), ("512 KiB", 512 * 1024),
    ("1.5MB", 1_500_000), ("2k", 2000), ("10B", 10), (4096, 4096), ("1TiB", 1 << 40),
])
def test_parse_size(text: str | int, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "GiB", "-1", "1 GiBs", "1.5B", "one", "1e3", "1 G i B"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid size"):
        parse_size(text)


@pytest.mark.parametrize("text", [-1, None, 1.5, True])
def test_parse_size_rejects_types(text: object) -> None:
    with pytest.raises(ValueError):
        parse_size(text)  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "value"), [
    ("20MiB/s", 20 * 1024 * 1024), ("1.5GB/s", 1.5e9), ("100000", 1e5), (250.5, 250.5),
    ("8 kib/s", 8192),
])
def test_parse_rate(text: str | float, value: float) -> None:
    assert parse_rate(text) == value


@pytest.mark.parametrize("text", ["0", "0MiB/s", "-3/s", "fast", "/s", "1 parsec/s"])
def test_parse_rate_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid rate"):
        parse_rate(text)


def test_cache_settings(tmp_path: Path) -> None:
    settings = CacheSettings.model_validate(
        {"volumes": [{"path": tmp_path / "a", "capacity_bytes": "1GiB"},
                     {"path": tmp_path / "b", "capacity_bytes": 10}]})
    assert settings.capacity_bytes == (1 << 30) + 10 and settings.enabled
    assert settings.durability == "fsync" and settings.utilization_threshold == 0.3
    assert not CacheSettings().enabled
    assert not CacheSettings(volumes=[CacheVolumeSettings(path=tmp_path, capacity_bytes=0)]
                             ).enabled
    for bad in ({"durability": "sometimes"}, {"utilization_threshold": 0},
                {"utilization_threshold": 1.5}, {"flush_concurrency": 0},
                {"chunk_size": 10}, {"unknown": 1}):
        with pytest.raises(ValidationError):
            CacheSettings(**bad)
    with pytest.raises(ValidationError, match="expected a size such as 1GiB"):
        CacheVolumeSettings.model_validate({"path": tmp_path, "capacity_bytes": "lots"})
    with pytest.raises(ValidationError, match="distinct"):
        CacheSettings.model_validate({"volumes": [{"path": tmp_path, "capacity_bytes": 1},
                                                  {"path": tmp_path, "capacity_bytes": 2}]})
