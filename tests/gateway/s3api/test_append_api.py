"""Appends with ``x-amz-write-offset-bytes`` (S3 Express One Zone's PutObject header) on a
gateway whose backend has ranged writes (blobseer_like, no cache tier)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.conftest import make_client
from tests.support.server import SquallProcess


@pytest.fixture(scope="module")
def striped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    base = tmp_path_factory.mktemp("append")
    providers = ",".join(str(base / f"p{i}") for i in range(3))
    server = SquallProcess(base / "data", ["--backend", f"blobseer_like:{providers}?chunk=64KiB",
                                           "--cache-size", "0"]).start()
    yield server
    assert server.stop() == 0, server.log()


def _code(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    resp = exc.value.response
    return resp["Error"]["Code"], resp["ResponseMetadata"]["HTTPStatusCode"]


def test_appends_grow_the_object(striped: SquallProcess) -> None:
    s3: Any = make_client(striped.endpoint)
    s3.create_bucket(Bucket="logs")
    s3.put_object(Bucket="logs", Key="run.log", Body=b"first\n", WriteOffsetBytes=0)
    s3.put_object(Bucket="logs", Key="run.log", Body=b"second\n", WriteOffsetBytes=6)
    assert s3.get_object(Bucket="logs", Key="run.log")["Body"].read() == b"first\nsecond\n"
    for offset in (0, 5, 100):
        with pytest.raises(ClientError) as exc:
            s3.put_object(Bucket="logs", Key="run.log", Body=b"x", WriteOffsetBytes=offset)
        assert _code(exc) == ("InvalidWriteOffset", 400)
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket="logs", Key="run.log", Body=b"x", WriteOffsetBytes=13,
                      Metadata={"a": "b"})
    assert _code(exc) == ("InvalidRequest", 400)
    assert s3.get_object(Bucket="logs", Key="run.log")["Body"].read() == b"first\nsecond\n"


def test_appends_need_ranged_writes(squall: SquallProcess, bucket: str) -> None:
    s3: Any = make_client(squall.endpoint)
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="k", Body=b"x", WriteOffsetBytes=0)
    assert _code(exc) == ("NotImplemented", 501)
