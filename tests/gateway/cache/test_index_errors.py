"""RocksDB failures of the cache index become our errors without RocksDB's text.

The index's disk filling up is produced for real in tests/gateway/test_index_full_e2e.py
(a small tmpfs); here a write failure is injected (a stand-in for the RocksDB handle),
as other failures (an I/O error) cannot be produced on demand."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from backends.core import rocks
from backends.core.errors import ServiceUnavailable, SlowDown
from gateway.cache.index import Batch, Index
from gateway.protocol.errors import s3_error_for

ROCKSDB_TEXT = "IO error: No space left on device: {path}/000004.log"


class FailingDb:
    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, *args: Any) -> None:
        raise Exception(ROCKSDB_TEXT.format(path=self.path))  # noqa: TRY002 - as rocksdict


@pytest.mark.parametrize(("full", "error"), [(True, SlowDown), (False, ServiceUnavailable)])
def test_a_failed_index_write_names_no_file(tmp_path: Path, full: bool,
                                            error: type[Exception]) -> None:
    index = Index(tmp_path / "index")
    real = index._rocks.db
    try:
        index._rocks.db = FailingDb(tmp_path / "index")  # type: ignore[assignment]
        with mock.patch.object(rocks, "disk_full", return_value=full), \
                mock.patch.object(index._rocks, "_recover"), pytest.raises(error) as raised:
            index.write(Batch().put_format(), sync=True)
        assert getattr(raised.value, "retry_after", 0) >= 1
        spec, message = s3_error_for(raised.value)
        assert spec.status == 503 and str(tmp_path) not in message
        assert index.failure is not None and str(tmp_path) not in index.failure
    finally:
        index._rocks.db = real
        index._rocks.failure = None
        index.close()
