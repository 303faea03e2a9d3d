"""The error edge of the FUSE client: botocore errors -> typed errors -> errno."""

from __future__ import annotations

import errno

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from backends import errors as se
from gateway.fuse_mount.errors import EndpointUnreachable, UploadFailed, errno_for, translate
from gateway.s3api import errors as pe


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
