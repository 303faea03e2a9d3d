"""Load tests and benchmarks: ``python -m loadtests.bench`` (Squall beside the backend
and its peers, side by side in one run), the scenario and application benchmarks under
``bench``, Locust scenarios, and the distributed MinIO of ``python -m loadtests.minio``."""
