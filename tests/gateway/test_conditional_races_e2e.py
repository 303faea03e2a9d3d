"""Racing conditional writes on real gateways: of writers that all send ``If-None-Match: *``
(or the same ``If-Match``) for one key at once, exactly one wins and every other gets
412 PreconditionFailed or 409 ConditionalRequestConflict, on the cache tier (small writes
cached, large ones past it), without a cache, and across ``--workers 2``; the same for
CompleteMultipartUpload. Through boto3 and the aws CLI. (Cluster members:
tests/gateway/cluster/test_conditional_writes_e2e.py.)"""

from __future__ import annotations

import concurrent.futures
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.conftest import make_client
from tests.gateway.s3api.clients.helpers import make_aws, payload
from tests.support.server import SquallProcess

WRITERS = 6
LOSING = {(412, "PreconditionFailed"), (409, "ConditionalRequestConflict")}
GATEWAYS = {"cache": [], "no-cache": ["--cache-size", "0"], "workers": ["--workers", "2"]}


@pytest.fixture(scope="module", params=sorted(GATEWAYS))
def gateway(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    args = ["--min-part-size", "1024", *GATEWAYS[request.param]]
    server = SquallProcess(tmp_path_factory.mktemp(f"cond-{request.param}") / "data",
                           args).start()
    yield server
    assert server.stop() == 0, server.log()


def race(calls: list[Callable[[], Any]]) -> list[tuple[int, str]]:
    """Run ``calls`` at once (released together); each outcome as (status, error code or
    "")."""
    start = threading.Barrier(len(calls))

    def one(call: Callable[[], Any]) -> tuple[int, str]:
        start.wait()
        try:
            call()
        except ClientError as exc:
            err = exc.response
            return err["ResponseMetadata"]["HTTPStatusCode"], err["Error"]["Code"]
        return 200, ""

    with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(one, calls))


def check_one_winner(outcomes: list[tuple[int, str]]) -> int:
    winners = [i for i, outcome in enumerate(outcomes) if outcome == (200, "")]
    assert len(winners) == 1, outcomes
    assert all(o in LOSING for i, o in enumerate(outcomes) if i != winners[0]), outcomes
    return winners[0]


@pytest.mark.parametrize("size", [100, 3 * 1024 * 1024])
def test_racing_if_none_match_puts(gateway: SquallProcess, size: int) -> None:
    clients = [make_client(gateway.endpoint) for _ in range(WRITERS)]
    bucket = f"race-{uuid.uuid4().hex[:12]}"
    clients[0].create_bucket(Bucket=bucket)
    for round_ in range(4):
        key = f"k{round_}"
        bodies = [payload(size, f"{round_}-{i}") for i in range(WRITERS)]
        outcomes = race([
            (lambda c=c, b=b, k=key: c.put_object(Bucket=bucket, Key=k, Body=b,
                                                   IfNoneMatch="*"))
            for c, b in zip(clients, bodies, strict=True)])
        winner = check_one_winner(outcomes)
        got = clients[1].get_object(Bucket=bucket, Key=key)["Body"].read()
        assert got == bodies[winner]


def test_racing_if_match_puts(gateway: SquallProcess) -> None:
    clients = [make_client(gateway.endpoint) for _ in range(WRITERS)]
    bucket = f"race-{uuid.uuid4().hex[:12]}"
    clients[0].create_bucket(Bucket=bucket)
    etag = clients[0].put_object(Bucket=bucket, Key="k", Body=b"first")["ETag"]
    for round_ in range(4):
        bodies = [f"{round_}-{i}".encode() for i in range(WRITERS)]
        outcomes = race([
            (lambda c=c, b=b, e=etag: c.put_object(Bucket=bucket, Key="k", Body=b,
                                                    IfMatch=e))
            for c, b in zip(clients, bodies, strict=True)])
        winner = check_one_winner(outcomes)
        got = clients[1].get_object(Bucket=bucket, Key="k")
        assert got["Body"].read() == bodies[winner]
        etag = got["ETag"]


def test_racing_conditional_completions(gateway: SquallProcess) -> None:
    clients = [make_client(gateway.endpoint) for _ in range(WRITERS)]
    bucket = f"race-{uuid.uuid4().hex[:12]}"
    clients[0].create_bucket(Bucket=bucket)
    uploads = []
    for i, client in enumerate(clients):
        upload_id = client.create_multipart_upload(Bucket=bucket, Key="m")["UploadId"]
        part = client.upload_part(Bucket=bucket, Key="m", UploadId=upload_id, PartNumber=1,
                                  Body=f"upload {i}".encode())
        uploads.append((upload_id, part["ETag"]))
    outcomes = race([
        (lambda c=c, u=u, e=e: c.complete_multipart_upload(
            Bucket=bucket, Key="m", UploadId=u, IfNoneMatch="*",
            MultipartUpload={"Parts": [{"ETag": e, "PartNumber": 1}]}))
        for c, (u, e) in zip(clients, uploads, strict=True)])
    winner = check_one_winner(outcomes)
    got = clients[0].get_object(Bucket=bucket, Key="m")["Body"].read()
    assert got == f"upload {winner}".encode()
    # A refused completion leaves its upload in place.
    left = {u["UploadId"] for u in clients[0].list_multipart_uploads(Bucket=bucket)["Uploads"]}
    assert left == {u for i, (u, _) in enumerate(uploads) if i != winner}


def test_conditional_puts_through_the_cli(gateway: SquallProcess, tmp_path: Path) -> None:
    aws = make_aws(gateway.endpoint, tmp_path / "aws-home")
    bucket = f"cli-{uuid.uuid4().hex[:12]}"
    aws("s3api", "create-bucket", "--bucket", bucket)
    src = tmp_path / "body"
    src.write_bytes(b"once")
    first = json.loads(aws("s3api", "put-object", "--bucket", bucket, "--key", "k",
                           "--body", str(src), "--if-none-match", "*").stdout)
    again = aws("s3api", "put-object", "--bucket", bucket, "--key", "k", "--body", str(src),
                "--if-none-match", "*", ok=False)
    assert "(PreconditionFailed)" in again.stderr
    stale = aws("s3api", "put-object", "--bucket", bucket, "--key", "k", "--body", str(src),
                "--if-match", '"0123456789abcdef0123456789abcdef"', ok=False)
    assert "(PreconditionFailed)" in stale.stderr
    missing = aws("s3api", "put-object", "--bucket", bucket, "--key", "nothing", "--body",
                  str(src), "--if-match", first["ETag"], ok=False)
    assert "(NoSuchKey)" in missing.stderr
    # If-None-Match with the current ETag (RFC 9110): 412; with another, the write proceeds.
    etag = aws("s3api", "put-object", "--bucket", bucket, "--key", "k", "--body", str(src),
               "--if-none-match", first["ETag"], ok=False)
    assert "(PreconditionFailed)" in etag.stderr
    aws("s3api", "put-object", "--bucket", bucket, "--key", "k2", "--body", str(src),
        "--if-none-match", first["ETag"])
    aws("s3api", "put-object", "--bucket", bucket, "--key", "k", "--body", str(src),
        "--if-match", first["ETag"])
