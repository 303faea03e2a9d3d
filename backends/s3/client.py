"""The pooled aiobotocore client: opened on first use inside the event loop, closed once."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiobotocore.config import AioConfig
from aiobotocore.session import AioSession

from backends.s3.config import S3Config


def client_config(config: S3Config) -> AioConfig:
    """Retries, timeouts and pool size from the configuration.

    Bodies are protected by the Content-MD5 Squall always sends, so payloads are not
    SHA-256 signed and botocore computes no extra CRC over them (both would hash every
    body on the event loop); responses are not re-hashed either (Squall checks ETags).
    """
    return AioConfig(
        region_name=config.region,
        signature_version="s3v4",
        retries={"total_max_attempts": config.retries, "mode": "standard"},
        connect_timeout=config.connect_timeout,
        read_timeout=config.read_timeout,
        max_pool_connections=config.max_connections,
        s3={"addressing_style": config.addressing, "payload_signing_enabled": False},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        tcp_keepalive=True,
    )


class ClientHolder:
    """Owns one aiobotocore S3 client for the backend's lifetime."""

    def __init__(self, config: S3Config) -> None:
        self._config = config
        self._stack = contextlib.AsyncExitStack()
        self._client: Any = None
        self._lock: asyncio.Lock | None = None
        self._closed = False

    async def get(self) -> Any:
        if self._client is not None:
            return self._client
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._closed:
                raise RuntimeError("the S3 backend is closed")
            if self._client is None:
                cfg = self._config
                session = AioSession()
                # Both keys, or neither (botocore's own credential chain).
                keyed = bool(cfg.access_key and cfg.secret_key)
                self._client = await self._stack.enter_async_context(session.create_client(
                    "s3", endpoint_url=cfg.endpoint, config=client_config(cfg),
                    aws_access_key_id=cfg.access_key if keyed else None,
                    aws_secret_access_key=cfg.secret_key if keyed else None))
        return self._client

    async def aclose(self) -> None:
        self._closed = True
        self._client = None
        await self._stack.aclose()
