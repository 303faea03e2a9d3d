"""FUSE client: a bucket of any Squall (or S3) endpoint mounted as a directory.

Written files stream to the endpoint as multipart uploads in large blocks; reads prefetch
sequentially. See docs/fuse-mount.md for semantics and limits.
"""
