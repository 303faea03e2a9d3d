"""Benchmark driver: Squall configurations side by side with direct posix I/O.

Run ``python -m loadtests.bench --help``; see docs/loadtests.md.
"""
