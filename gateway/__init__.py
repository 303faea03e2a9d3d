"""The Squall gateway: the S3 API (``s3api``) and its authentication (``auth``), the cache
tier (``cache``) that absorbs writes and flushes them to a backend, object versions
(``versioning``) and lifecycle rules (``lifecycle``), the FUSE mount (``fuse_mount``),
clusters of gateways (``cluster``), worker processes (``workers``), per-bucket and
per-user limits (``qos``), costs (``cost``), the dashboard (``dashboard``) and the
``squall`` commands (``cli``)."""
