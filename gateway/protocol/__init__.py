"""S3's vocabulary, shared by every layer above it: errors and their one mapping to S3
codes (``errors``, ``admin_errors``), request targets (bucket and key), XML and
responses, conditional requests, parts, listings, CORS rules and additional checksums.
It imports only the backends' shared core and the versioning errors."""
