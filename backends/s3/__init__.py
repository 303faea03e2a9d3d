"""The s3 backend: any upstream S3 service (AWS, MinIO, Ceph RGW, another Squall)."""

from backends.s3.backend import S3Backend
from backends.s3.config import S3Config, parse_config

__all__ = ["S3Backend", "S3Config", "parse_config"]
