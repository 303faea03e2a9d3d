"""Errors about delete markers (they carry the headers S3 sends with them), and about
writes asked of a process that does not own the key."""

from __future__ import annotations

from backends.core.errors import NoSuchKey, ServiceUnavailable


class DeleteMarkerIsLatest(NoSuchKey):
    """The specified key does not exist."""

    def __init__(self, bucket: str, key: str, version_id: str) -> None:
        super().__init__(bucket, key)
        self.response_headers = {"x-amz-delete-marker": "true",
                                 "x-amz-version-id": version_id}


class NotKeyOwner(ServiceUnavailable):
    """A write of a key reached a cluster member that does not own it; the key's writes
    run on its owner, under its lock (never expected: requests are routed there)."""

    def __init__(self, bucket: str, key: str) -> None:
        super().__init__(f"{bucket}/{key} is owned by another cluster member: its writes "
                         "run there.", resource=f"{bucket}/{key}")
