"""The answers of tests/gateway/s3api/test_fidelity_api.py on every route a request takes
(tests/gateway/routes.py): the cache admitting or bypassed (``--cache-size 0``),
``--workers 2``, each backend, and a cluster forwarding to the key's owner. A retried
CompleteMultipartUpload answers the first result, DeleteBucket takes a bucket's uploads
with it, a wrong checksum of every algorithm is BadDigest, If-None-Match with an ETag
decides a write."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from tests.conftest import make_client
from tests.gateway.routes import Route, route_fixture  # noqa: F401 (the fixture)
from tests.gateway.s3api.clients.helpers import new_bucket_name
from tests.gateway.s3api.test_fidelity_api import (
    checksums_of_every_algorithm,
    delete_bucket_with_uploads,
    retried_complete,
)
from tests.gateway.s3api.test_objects_api import code_of


@pytest.mark.timeout(300)
def test_fidelity_on_every_route(route: Route) -> None:
    s3 = make_client(route.endpoint)
    bucket = new_bucket_name("fid")
    s3.create_bucket(Bucket=bucket)
    retried_complete(s3, bucket, route.key(bucket, "retried"))
    checksums_of_every_algorithm(s3, bucket, route.key(bucket, "sum"))

    key = route.key(bucket, "cond")
    etag = s3.put_object(Bucket=bucket, Key=key, Body=b"v1")["ETag"]
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key=key, Body=b"v2", IfNoneMatch=f'"0000", {etag}')
    assert code_of(exc) == ("PreconditionFailed", 412)
    s3.put_object(Bucket=bucket, Key=key, Body=b"v2", IfNoneMatch='"0000"')
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"v2"

    emptied = new_bucket_name("fid")
    s3.create_bucket(Bucket=emptied)
    delete_bucket_with_uploads(s3, emptied, [route.key(emptied, "u1"),
                                             route.key(emptied, "u2")])
