"""Multipart cases of S3 conformance suites, through boto3, the aws CLI and raw requests:
a part uploaded twice where the first upload finishes last (the part is the upload that
finished last, as on S3), repeated part numbers in CompleteMultipartUpload, and plain
small uploads completed while another client lists the bucket."""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.conftest import make_client
from tests.gateway.s3api.clients.helpers import Cli, make_aws
from tests.gateway.s3api.test_objects_api import code_of
from tests.support.raw_http import Connection, signed
from tests.support.server import SquallProcess


@pytest.fixture
def aws(squall: SquallProcess, tmp_path: Path) -> Cli:
    return make_aws(squall.endpoint, tmp_path / "aws-home")


class FakeFile:
    """A file of ``size`` times ``char`` that calls ``interrupt`` when a read reaches its
    end (before returning the bytes), as conformance suites build the race."""

    def __init__(self, size: int, char: bytes, interrupt: Callable[[], None] | None = None
                 ) -> None:
        self.size, self.char, self.interrupt, self.offset = size, char, interrupt, 0

    def seek(self, offset: int, whence: int = 0) -> int:
        self.offset = offset if whence == 0 else self.offset + offset if whence == 1 \
            else self.size + offset
        return self.offset

    def tell(self) -> int:
        return self.offset

    def read(self, size: int = -1) -> bytes:
        count = self.size - self.offset if size < 0 else min(size, self.size - self.offset)
        self.offset += count
        if self.interrupt is not None and self.offset == self.size and count > 0:
            self.interrupt()
        return self.char * count


def test_resend_where_the_first_upload_finishes_last(s3: Any, bucket: str) -> None:
    """The second upload of part 1 (B) runs while the client still sends the first (A):
    A finishes last, so the part is A; the client lists both answers in order."""
    reads = [0]
    dry = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    s3.upload_part(Bucket=bucket, Key="k", UploadId=dry, PartNumber=1,
                   Body=FakeFile(8, b"C", lambda: reads.__setitem__(0, reads[0] + 1)))
    s3.abort_multipart_upload(Bucket=bucket, Key="k", UploadId=dry)
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    parts: list[dict[str, Any]] = []
    seen = [0]

    def send_b() -> None:
        seen[0] += 1
        if seen[0] == reads[0]:  # the read that sends A's last bytes
            res = s3.upload_part(Bucket=bucket, Key="k", UploadId=upload_id, PartNumber=1,
                                 Body=FakeFile(8, b"B"))
            parts.append({"ETag": res["ETag"], "PartNumber": 1})

    res = s3.upload_part(Bucket=bucket, Key="k", UploadId=upload_id, PartNumber=1,
                         Body=FakeFile(8, b"A", send_b))
    parts.append({"ETag": res["ETag"], "PartNumber": 1})
    assert len(parts) == 2 and parts[0]["ETag"] != parts[1]["ETag"]
    listed = s3.list_parts(Bucket=bucket, Key="k", UploadId=upload_id)["Parts"]
    assert [p["ETag"] for p in listed] == [parts[1]["ETag"]]
    s3.complete_multipart_upload(Bucket=bucket, Key="k", UploadId=upload_id,
                                 MultipartUpload={"Parts": parts})
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"A" * 8


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[SquallProcess]:
    """A gateway of its own, its cache empty: a part the cache admits. (Where the
    admission sends a part past the cache, sends of one part number are serialised, so a
    resend waits for a stalled first send, up to the slow-body limits: docs/cache.md.)"""
    server = SquallProcess(tmp_path / "data", ["--min-part-size", str(5 * 1024 * 1024)])
    yield server.start()
    assert server.stop() == 0, server.log()


@pytest.mark.parametrize("size", [64 * 1024, 6 * 1024 * 1024])
def test_a_stalled_part_that_finishes_after_its_resend_is_the_part(
        fresh: SquallProcess, size: int) -> None:
    """Server side: A's request arrives first and stalls half-way; B is uploaded in full;
    then A ends. The part is A, the last to finish."""
    squall, s3, bucket = fresh, make_client(fresh.endpoint), f"t-{uuid.uuid4().hex[:16]}"
    s3.create_bucket(Bucket=bucket)
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    first, second = b"A" * size, b"B" * size
    path = f"/{bucket}/k?partNumber=1&uploadId={upload_id}"
    head, body = signed(squall, "PUT", path, first)
    slow = Connection(squall)
    try:
        slow.sock.sendall(head + body[:size // 2])
        time.sleep(0.3)  # A is being received
        b = s3.upload_part(Bucket=bucket, Key="k", UploadId=upload_id, PartNumber=1,
                           Body=second)
        slow.sock.sendall(body[size // 2:])
        status, headers, _ = slow.read_response("PUT")
    finally:
        slow.close()
    assert status == 200
    a_etag = headers["etag"]
    assert a_etag == f'"{hashlib.md5(first).hexdigest()}"' != b["ETag"]
    listed = s3.list_parts(Bucket=bucket, Key="k", UploadId=upload_id)["Parts"]
    assert [(p["ETag"], p["Size"]) for p in listed] == [(a_etag, size)]
    with pytest.raises(ClientError) as exc:  # B's answer alone names a part that is gone
        s3.complete_multipart_upload(Bucket=bucket, Key="k", UploadId=upload_id,
                                     MultipartUpload={"Parts": [{"ETag": b["ETag"],
                                                                 "PartNumber": 1}]})
    assert code_of(exc) == ("InvalidPart", 400)
    s3.complete_multipart_upload(Bucket=bucket, Key="k", UploadId=upload_id,
                                 MultipartUpload={"Parts": [{"ETag": b["ETag"],
                                                             "PartNumber": 1},
                                                            {"ETag": a_etag,
                                                             "PartNumber": 1}]})
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == first


def test_repeated_part_numbers_in_a_completion(s3: Any, aws: Cli, bucket: str,
                                               tmp_path: Path) -> None:
    big = b"x" * (5 * 1024 * 1024)
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    old = s3.upload_part(Bucket=bucket, Key="k", UploadId=upload_id, PartNumber=1,
                         Body=b"y" * len(big))
    one = s3.upload_part(Bucket=bucket, Key="k", UploadId=upload_id, PartNumber=1, Body=big)
    two = s3.upload_part(Bucket=bucket, Key="k", UploadId=upload_id, PartNumber=2,
                         Body=b"tail")
    p_old, p_one, p_two = ({"ETag": r["ETag"], "PartNumber": n}
                           for r, n in ((old, 1), (one, 1), (two, 2)))
    for bad, code in (([p_one, p_two, p_one], "InvalidPartOrder"),
                      ([p_two, p_one], "InvalidPartOrder"),
                      ([p_one, p_old, p_two], "InvalidPart")):  # the last entry counts
        with pytest.raises(ClientError) as exc:
            s3.complete_multipart_upload(Bucket=bucket, Key="k", UploadId=upload_id,
                                         MultipartUpload={"Parts": bad})
        assert code_of(exc) == (code, 400)
    document = tmp_path / "parts.json"
    document.write_text(json.dumps({"Parts": [p_old, p_one, p_two]}))
    out = json.loads(aws("s3api", "complete-multipart-upload", "--bucket", bucket, "--key",
                         "k", "--upload-id", upload_id, "--multipart-upload",
                         f"file://{document}").stdout)
    assert out["ETag"] == f'"{_multipart_etag([big, b"tail"])}"'
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == big + b"tail"


def _multipart_etag(parts: list[bytes]) -> str:
    digests = b"".join(hashlib.md5(p).digest() for p in parts)
    return f"{hashlib.md5(digests).hexdigest()}-{len(parts)}"


def test_small_uploads_complete_while_the_bucket_is_listed(s3: Any, aws: Cli,
                                                           bucket: str) -> None:
    """CompleteMultipartUpload of plain one-part uploads, while another client lists the
    uploads and the objects: never NoSuchUpload (a conformance run saw it once)."""
    stop = threading.Event()
    failures: list[str] = []

    def lister() -> None:
        while not stop.is_set():
            try:
                s3.list_multipart_uploads(Bucket=bucket)
                s3.list_objects_v2(Bucket=bucket)
            except ClientError as exc:
                failures.append(str(exc))

    thread = threading.Thread(target=lister)
    thread.start()
    try:
        for i in range(30):
            key = ["mymultipart", "a b/ü+", "x%2Fy"][i % 3]
            upload_id = s3.create_multipart_upload(Bucket=bucket, Key=key,
                                                   ContentType="text/bla",
                                                   Metadata={"foo": "bar"})["UploadId"]
            part = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=1,
                                  Body=b"z" * (1 + i))
            uploads = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
            assert upload_id in [u["UploadId"] for u in uploads]
            s3.complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=upload_id,
                MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]})
            got = s3.get_object(Bucket=bucket, Key=key)
            assert got["ContentLength"] == 1 + i and got["Metadata"] == {"foo": "bar"}
    finally:
        stop.set()
        thread.join()
    assert failures == []
    # The same through the aws CLI.
    upload_id = json.loads(aws("s3api", "create-multipart-upload", "--bucket", bucket,
                               "--key", "cli").stdout)["UploadId"]
    etag = json.loads(aws("s3api", "upload-part", "--bucket", bucket, "--key", "cli",
                          "--upload-id", upload_id, "--part-number", "1").stdout)["ETag"]
    listed = json.loads(aws("s3api", "list-multipart-uploads", "--bucket", bucket).stdout)
    assert [u["UploadId"] for u in listed["Uploads"]] == [upload_id]
    aws("s3api", "complete-multipart-upload", "--bucket", bucket, "--key", "cli",
        "--upload-id", upload_id, "--multipart-upload",
        json.dumps({"Parts": [{"ETag": etag, "PartNumber": 1}]}))
    assert s3.head_object(Bucket=bucket, Key="cli")["ContentLength"] == 0
