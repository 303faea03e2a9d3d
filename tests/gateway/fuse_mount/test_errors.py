"""The error edge of the FUSE client: botocore errors -> typed errors -> errno."""

from __future__ import annotations

import errno
import logging

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from backends.core import errors as se
from gateway.fuse_mount.binding import mfusepy
from gateway.fuse_mount.errors import (
    EndpointUnreachable,
    UploadFailed,
    describe,
    errno_for,
    translate,
)
from gateway.fuse_mount.fuseop import fuse_op
from gateway.protocol import errors as pe


def client_error(code: str, status: int) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code},
                        "ResponseMetadata": {"HTTPStatusCode": status, "RequestId": "R1"}},
                       "Op")


@pytest.mark.parametrize(("code", "status", "cls", "number"), [
    ("NoSuchKey", 404, se.NoSuchKey, errno.ENOENT),
    ("", 404, se.NoSuchKey, errno.ENOENT),  # HEAD: no body, status only
    ("AccessDenied", 403, pe.AccessDenied, errno.EACCES),
    ("SignatureDoesNotMatch", 403, pe.SignatureDoesNotMatch, errno.EACCES),
    ("SlowDown", 503, se.SlowDown, errno.ENOSPC),
    ("PreconditionFailed", 412, se.PreconditionFailed, errno.ESTALE),
    ("EntityTooLarge", 400, se.EntityTooLarge, errno.EFBIG),
    ("InternalError", 500, se.BackendError, errno.EIO),
])
def test_client_errors_become_typed_errors_and_errno(code: str, status: int, cls: type,
                                                     number: int,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(cls) as info, translate("GetObject", "b", "k"):
        raise client_error(code, status)
    assert errno_for(info.value) == number
    if cls is not se.NoSuchKey:
        assert "request id R1" in caplog.text


def test_unreachable_endpoint_and_failed_uploads_are_eio() -> None:
    with pytest.raises(EndpointUnreachable) as info, translate("PutObject", "b", "k"):
        raise EndpointConnectionError(endpoint_url="http://127.0.0.1:1")
    assert errno_for(info.value) == errno.EIO
    assert errno_for(UploadFailed()) == errno.EIO
    assert errno_for(OSError(errno.ENOTEMPTY, "x")) == errno.ENOTEMPTY


def test_calls_after_a_failed_upload_keep_the_errno_of_the_failure() -> None:
    # Every call after a failed upload raises UploadFailed "from" the failure: a full
    # gateway (503 SlowDown after all attempts) stays ENOSPC, as documented, not EIO.
    for cause, number in ((se.SlowDown("the cache is full"), errno.ENOSPC),
                          (se.BackendError("boom"), errno.EIO),
                          (se.EntityTooLarge("too big"), errno.EFBIG)):
        try:
            raise UploadFailed(resource="k") from cause
        except UploadFailed as exc:
            assert errno_for(exc) == number


def test_a_file_write_refused_is_logged_once_by_the_file_not_per_request(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    refused = ClientError({"Error": {"Code": "InvalidRequest",
                                     "Message": "Checksum Type mismatch occurred"},
                           "ResponseMetadata": {"HTTPStatusCode": 400, "RequestId": "R7"}},
                          "UploadPart")
    with pytest.raises(se.BackendError) as info, translate("UploadPart", "b", "k"):
        raise refused
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]  # the file reports it
    assert describe(info.value) == ("400 InvalidRequest: Checksum Type mismatch occurred "
                                    "(request id R7)")
    assert errno_for(info.value) == errno.EIO


def test_storage_errors_of_fuse_calls_leave_no_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    class Ops:
        @fuse_op
        def write(self, path: str) -> None:
            raise UploadFailed(resource=path) from se.BackendError("refused")

        @fuse_op
        def read(self, path: str) -> None:
            raise se.BackendError("the gateway answered 500")

        @fuse_op
        def buggy(self, path: str) -> None:
            raise KeyError(path)

    for call in (Ops().write, Ops().read):
        with pytest.raises(mfusepy.FuseOSError) as raised:
            call("/f")
        assert raised.value.errno == errno.EIO
    assert all(r.levelno == logging.DEBUG and r.exc_info is None for r in caplog.records)
    assert len(caplog.records) == 1  # the read; the write's failure was the file's to say
    with pytest.raises(mfusepy.FuseOSError):
        Ops().buggy("/f")
    assert caplog.records[-1].levelno == logging.ERROR and caplog.records[-1].exc_info
