"""The posix backend: objects as files of a directory tree other tools can read."""

from backends.posix.backend import PosixBackend

__all__ = ["PosixBackend"]
