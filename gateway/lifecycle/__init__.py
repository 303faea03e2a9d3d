"""Bucket lifecycle: the rules (``rules``), the guard that keeps expiration from racing
writes (``guard``) and the background scanner that enforces them (``scanner``)."""
