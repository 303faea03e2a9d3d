"""blobseer_like: objects striped in chunks over N providers, every write a new version."""

from backends.blobseer_like.backend import BlobseerBackend

__all__ = ["BlobseerBackend"]
