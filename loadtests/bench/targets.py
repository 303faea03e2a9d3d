"""What a workload runs against: an S3 endpoint, or a posix directory written directly.

Both offer the same four async operations. The S3 target is one aiohttp session (reused
connections, one per concurrent client) signing with the clients' signer (UNSIGNED-PAYLOAD
by default, gateway.client.sigv4):
a cheap client, because on a small machine client CPU is taken from the server. The posix
target is the baseline: the same bytes written with temp file + fsync + rename and read back,
by a pool of as many threads as the workload has clients.
"""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol, TypeVar

import aiohttp
from yarl import URL

from gateway.client.sigv4 import Signer, object_path
from loadtests.s3xml import error_code

_BLOCK = 1 << 20
T = TypeVar("T")


class TargetError(Exception):
    """An operation failed (unexpected HTTP status, I/O error)."""


class Target(Protocol):
    name: str

    async def put(self, key: str, data: bytes) -> None: ...

    async def get(self, key: str) -> int:
        """Read the whole object; return its length."""
        ...

    async def stat(self, key: str) -> int: ...

    async def delete(self, key: str) -> None: ...

    async def close(self) -> None: ...


class S3Target:
    """Objects in one bucket of an S3 endpoint."""

    def __init__(self, endpoint: str, bucket: str, signer: Signer, *, clients: int) -> None:
        self.name = endpoint
        self.endpoint = endpoint.rstrip("/")
        self.bucket = bucket
        self._signer = signer
        connector = aiohttp.TCPConnector(limit=max(1, clients), ttl_dns_cache=None)
        self._session = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=600),
            skip_auto_headers=("User-Agent", "Content-Type"),
        )

    async def _call(
        self,
        method: str,
        key: str | None,
        *,
        data: bytes = b"",
        expected: tuple[int, ...] = (200,),
        read: bool = True,
    ) -> tuple[int, int, dict[str, str]]:
        path = object_path(self.bucket, key)
        headers = self._signer.sign(method, self.endpoint + path, None, data)
        url = URL(self.endpoint + path, encoded=True)
        try:
            async with self._session.request(
                method, url, data=data or None, headers=headers
            ) as resp:
                if resp.status not in expected:
                    code = error_code(await resp.read()) or "UnexpectedStatus"
                    raise TargetError(f"{method} {path}: HTTP {resp.status} {code}")
                received = 0
                if read:
                    async for chunk in resp.content.iter_any():
                        received += len(chunk)
                return resp.status, received, dict(resp.headers)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise TargetError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc

    async def create_bucket(self) -> None:
        try:
            await self._call("PUT", None)
        except TargetError as exc:
            if "BucketAlreadyOwnedByYou" not in str(exc) and "BucketAlreadyExists" not in str(exc):
                raise

    async def put(self, key: str, data: bytes) -> None:
        await self._call("PUT", key, data=data)

    async def get(self, key: str) -> int:
        return (await self._call("GET", key))[1]

    async def stat(self, key: str) -> int:
        headers = (await self._call("HEAD", key, read=False))[2]
        return int(headers.get("Content-Length", 0))

    async def delete(self, key: str) -> None:
        await self._call("DELETE", key, expected=(204, 200))

    async def close(self) -> None:
        await self._session.close()


class PosixTarget:
    """Files under ``root``, written and read directly by a pool of ``clients`` threads."""

    def __init__(self, root: Path, *, clients: int) -> None:
        self.name = f"posix:{root}"
        self.root = root
        self._pool = ThreadPoolExecutor(max_workers=max(1, clients), thread_name_prefix="posix")
        self._buffers = threading.local()

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if self.root.resolve() not in path.parents:
            raise TargetError(f"key escapes the root: {key!r}")
        return path

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)
        except OSError as exc:
            raise TargetError(str(exc)) from exc

    def _write(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view[: _BLOCK * 8]) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)

    def _read(self, key: str) -> int:
        buf = getattr(self._buffers, "buf", None)
        if buf is None:
            buf = self._buffers.buf = bytearray(_BLOCK)
        total = 0
        with open(self._path(key), "rb", buffering=0) as f:
            while n := f.readinto(buf):
                total += n
        return total

    async def put(self, key: str, data: bytes) -> None:
        await self._run(self._write, key, data)

    async def get(self, key: str) -> int:
        return await self._run(self._read, key)

    async def stat(self, key: str) -> int:
        return (await self._run(os.stat, self._path(key))).st_size

    async def delete(self, key: str) -> None:
        await self._run(os.unlink, self._path(key))

    async def close(self) -> None:
        self._pool.shutdown(wait=True)
