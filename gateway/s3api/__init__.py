"""The S3 protocol: request routing, authentication (SigV4, SigV2, presigned URLs),
bodies (chunked, checksums), XML answers and S3's error codes; the handlers of each
operation are in ``handlers``."""
