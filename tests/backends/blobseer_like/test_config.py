"""The ``blobseer_like:`` spec, the factory, and the directories a store accepts."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.blobseer_like import BlobseerBackend
from backends.blobseer_like.config import BlobseerConfig, parse_config
from backends.blobseer_like.provider import ProviderError
from backends.core.errors import BackendError
from backends.registry import BackendOptions, create_backend
from tests.backends.blobseer_like.conftest import Factory
from tests.backends.blobseer_like.support import get, put


def test_parse_defaults_and_options(tmp_path: Path) -> None:
    config = parse_config(f"{tmp_path}/a,{tmp_path}/b")
    assert config == BlobseerConfig(providers=(tmp_path / "a", tmp_path / "b"))
    config = parse_config(f"{tmp_path}/a?chunk=4MiB&cap=50MiB/s&standby={tmp_path}/s1,"
                          f"{tmp_path}/s2&burst=100MiB/s&burst_window=0.5&fanout=3"
                          f"&replicas=3&gc_interval=0")
    assert config.chunk_size == 4 << 20 and config.cap == 50 * 2**20
    assert config.standby == (tmp_path / "s1", tmp_path / "s2")
    assert (config.burst, config.burst_window, config.fanout) == (100 * 2**20, 0.5, 3)
    assert (config.replicas, config.gc_interval) == (3, 0)


@pytest.mark.parametrize(("args", "message"), [
    ("", "comma-separated"),
    ("/a,,/b", "comma-separated"),
    ("/a,/a", "twice"),
    ("/a?color=red", "unknown blobseer_like option 'color'"),
    ("/a?chunk=1KiB", "between 4KiB and 64MiB"),
    ("/a?chunk=1GiB", "between 4KiB and 64MiB"),
    ("/a?chunk=lots", "invalid size"),
    ("/a?cap=0", "positive"),
    ("/a?cap=fast", "invalid rate"),
    ("/a?burst=10MiB/s", "needs standby="),
    ("/a?standby=/a", "must differ"),
    ("/a?fanout=0", ">= 1"),
    ("/a?replicas=two", "not an integer"),
    ("/a?gc_interval=-1", ">= 0"),
    ("/a?chunk=1MiB&chunk=2MiB", "given twice"),
])
def test_parse_errors(args: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_config(args)


def test_factory_opens_and_locks(tmp_path: Path) -> None:
    spec = f"{tmp_path}/p0,{tmp_path}/p1?chunk=64KiB"
    options = BackendOptions(data_dir=tmp_path / "data")
    first = create_backend("blobseer_like", spec, options)
    assert {p.path for p in first.providers()} == {str(tmp_path / "p0"),  # type: ignore[attr-defined]
                                                   str(tmp_path / "p1")}
    with pytest.raises(ValueError, match="in use by another process"):
        create_backend("blobseer_like", spec, options)
    first.store.close()  # type: ignore[attr-defined]
    again = create_backend("blobseer_like", spec, options)
    again.store.close()  # type: ignore[attr-defined]


def test_refuses_foreign_directories(tmp_path: Path, make: Factory) -> None:
    (tmp_path / "p1").mkdir()
    (tmp_path / "p1" / "somebody's file").write_text("keep me")
    with pytest.raises(ProviderError, match="not empty"):
        make(providers=2).open()
    assert (tmp_path / "p1" / "somebody's file").read_text() == "keep me"


async def test_refuses_providers_of_two_stores(tmp_path: Path, make: Factory) -> None:
    one = make(providers=1)
    one.open()
    await one.aclose()
    other = parse_config(f"{tmp_path}/q0")
    second = BlobseerBackend(other, index_root=tmp_path / "data2")
    second.open()
    await second.aclose()
    mixed = BlobseerBackend(parse_config(f"{tmp_path}/p0,{tmp_path}/q0"),
                            index_root=tmp_path / "data3")
    with pytest.raises(ProviderError, match="different blobseer_like stores"):
        mixed.open()


async def test_missing_member_is_a_clear_error(tmp_path: Path, make: Factory) -> None:
    store = make(providers=2)
    await store.create_bucket("bkt")
    await put(store, "k", b"v" * 200_000)
    await store.aclose()
    (tmp_path / "p1").rename(tmp_path / "moved")
    with pytest.raises(ProviderError, match="expected at"):
        make(providers=1).open()
    # Naming its new place finds it again.
    moved = parse_config(f"{tmp_path}/p0,{tmp_path}/moved")
    again = BlobseerBackend(moved, index_root=tmp_path / "data" / "blobseer")
    try:
        assert await get(again, "k") == b"v" * 200_000
    finally:
        await again.aclose()


async def test_closed_backend_refuses(make: Factory) -> None:
    store = make()
    await store.aclose()
    with pytest.raises(BackendError):
        await store.list_buckets()
