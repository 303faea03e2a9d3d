"""End-to-end tests: real S3 clients against a real ``squall serve``."""
