"""The access log line: request id, operation (also of a request that fails to
authenticate), method, path, status, S3 error code, access key id, bytes in and out,
duration; one line whatever the client sends."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import make_client
from tests.support.server import ACCESS_KEY, SquallProcess
from tests.support.signing import send

LINE = re.compile(r"INFO (?:worker-\d+ )?squall\.access (?P<id>[0-9A-F]+) (?P<op>\S+) (?P<method>[A-Z]+) "
                  r"(?P<path>\S+) (?P<status>\d{3}) (?P<code>\S+) (?P<key>\S+) "
                  r"(?P<bytes_in>\S+) (?P<bytes_out>\S+) (?P<ms>\d+\.\d)ms$")


def access_line(server: SquallProcess, request_id: str, timeout: float = 5.0
                ) -> dict[str, str]:
    """The parsed access-log line of ``request_id`` (polled until it is written)."""
    deadline = time.monotonic() + timeout
    while True:
        for line in server.log_path.read_text(errors="replace").splitlines():
            if f" squall.access {request_id} " in line:
                match = LINE.search(line)
                assert match, line
                return match.groupdict()
        assert time.monotonic() < deadline, f"no access-log line for {request_id}"
        time.sleep(0.05)


def fields(server: SquallProcess, response: httpx.Response) -> tuple[str, ...]:
    line = access_line(server, response.headers["x-amz-request-id"])
    return (line["op"], line["method"], line["path"], line["status"], line["code"],
            line["key"], line["bytes_in"], line["bytes_out"])


def test_successful_requests(squall: SquallProcess, bucket: str) -> None:
    url = f"{squall.endpoint}/{bucket}/obj"
    put = send("PUT", url, b"0123456789")
    assert fields(squall, put) == ("PutObject", "PUT", f"/{bucket}/obj", "200", "-",
                                   ACCESS_KEY, "10", "0")
    get = send("GET", url)
    assert fields(squall, get) == ("GetObject", "GET", f"/{bucket}/obj", "200", "-",
                                   ACCESS_KEY, "-", "10")
    ranged = send("GET", url, headers={"range": "bytes=2-4"})
    assert fields(squall, ranged)[3:] == ("206", "-", ACCESS_KEY, "-", "3")
    head = send("HEAD", url)
    assert fields(squall, head)[:4] == ("HeadObject", "HEAD", f"/{bucket}/obj", "200")
    assert fields(squall, head)[7] == "0"  # a HEAD sends no body
    line = access_line(squall, get.headers["x-amz-request-id"])
    assert 0 <= float(line["ms"]) < 10_000


def test_boto3_requests(squall: SquallProcess, s3: Any, bucket: str) -> None:
    meta = s3.put_object(Bucket=bucket, Key="b", Body=b"x" * 1000)["ResponseMetadata"]
    line = access_line(squall, meta["RequestId"])
    assert (line["op"], line["status"], line["key"]) == ("PutObject", "200", ACCESS_KEY)
    assert int(line["bytes_in"]) >= 1000  # aws-chunked framing and trailer included
    listed = s3.list_objects_v2(Bucket=bucket)["ResponseMetadata"]
    line = access_line(squall, listed["RequestId"])
    assert (line["op"], line["path"]) == ("ListObjectsV2", f"/{bucket}")
    assert int(line["bytes_out"]) > 0


def test_errors_carry_their_code(squall: SquallProcess, bucket: str) -> None:
    missing = send("GET", f"{squall.endpoint}/{bucket}/missing")
    assert fields(squall, missing)[:6] == ("GetObject", "GET", f"/{bucket}/missing", "404",
                                           "NoSuchKey", ACCESS_KEY)
    not_allowed = send("POST", f"{squall.endpoint}/{bucket}/k")
    assert fields(squall, not_allowed)[:6] == ("Unknown", "POST", f"/{bucket}/k", "405",
                                               "MethodNotAllowed", ACCESS_KEY)
    bad = send("GET", f"{squall.endpoint}/{bucket}?list-type=2&max-keys=%C2%B2")
    assert fields(squall, bad)[:6] == ("ListObjectsV2", "GET", f"/{bucket}", "400",
                                       "InvalidArgument", ACCESS_KEY)


def test_authentication_failures_name_operation_and_key(squall: SquallProcess,
                                                        bucket: str) -> None:
    anonymous = httpx.get(f"{squall.endpoint}/")
    assert fields(squall, anonymous)[:6] == ("ListBuckets", "GET", "/", "403",
                                             "AccessDenied", "-")
    stranger = send("PUT", f"{squall.endpoint}/{bucket}/k", b"abc", access_key="NOPE")
    assert fields(squall, stranger)[:7] == ("PutObject", "PUT", f"/{bucket}/k", "403",
                                            "InvalidAccessKeyId", "NOPE", "3")
    wrong = send("DELETE", f"{squall.endpoint}/{bucket}/k", secret_key="wrong")
    assert fields(squall, wrong)[:6] == ("DeleteObject", "DELETE", f"/{bucket}/k", "403",
                                         "SignatureDoesNotMatch", ACCESS_KEY)
    # A request that cannot be routed still answers the authentication error first.
    unroutable = httpx.post(f"{squall.endpoint}/{bucket}/k")
    assert fields(squall, unroutable)[:5] == ("Unknown", "POST", f"/{bucket}/k", "403",
                                              "AccessDenied")


def test_presigned_failures_name_the_key(squall: SquallProcess, s3: Any,
                                         bucket: str) -> None:
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "p"})
    tampered = re.sub(r"X-Amz-Signature=[0-9a-f]+", "X-Amz-Signature=" + "0" * 64, url)
    response = httpx.get(tampered)
    assert fields(squall, response)[:6] == ("GetObject", "GET", f"/{bucket}/p", "403",
                                            "SignatureDoesNotMatch", ACCESS_KEY)
    v2 = httpx.get(f"{squall.endpoint}/{bucket}/p?AWSAccessKeyId=OLD%0Akey&Expires=1"
                   "&Signature=x")
    assert fields(squall, v2)[4:6] == ("InvalidAccessKeyId", "OLD%0Akey")


def test_client_chosen_text_stays_on_one_line(squall: SquallProcess, bucket: str) -> None:
    url = f"{squall.endpoint}/{bucket}/a%20b%0Ac%0D%0Afake%20line"
    response = send("PUT", url, b"x")
    assert response.status_code == 200
    assert fields(squall, response)[2] == f"/{bucket}/a%20b%0Ac%0D%0Afake%20line"


@pytest.fixture(scope="module")
def quiet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    server = SquallProcess(tmp_path_factory.mktemp("quiet") / "data",
                           env={"SQUALL_ACCESS_LOG": "false"}).start()
    yield server
    assert server.stop() == 0, server.log()


def test_access_log_off(quiet: SquallProcess) -> None:
    s3 = make_client(quiet.endpoint)
    s3.create_bucket(Bucket="quiet")
    s3.put_object(Bucket="quiet", Key="k", Body=b"x")
    assert s3.get_object(Bucket="quiet", Key="k")["Body"].read() == b"x"
    assert "squall.access" not in quiet.log_path.read_text(errors="replace")
