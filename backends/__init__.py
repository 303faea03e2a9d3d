"""Persistent storage behind the cache tier: the ``Backend`` protocols (``base``), the
shared core (keys, errors, checksums, conditions, streams, throttling) and the backends
themselves: ``posix`` (a directory), ``blobseer_like`` (striped, versioned blobs over
providers) and ``s3`` (an upstream S3 service)."""
