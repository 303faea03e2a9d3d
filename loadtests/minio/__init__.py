"""MinIO behind Squall: the pinned server binary, a single node on loopback, and a
distributed, erasure-coded cluster in network namespaces (``python -m loadtests.minio``)."""
