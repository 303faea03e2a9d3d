"""Horizontally replicated gateways: a fixed ring of peers, one owner per (bucket, key).

See docs/cluster.md. ``ring`` and ``client`` are dependency-free so that clients (the
FUSE mount, scripts) can compute owners without importing the server.
"""
