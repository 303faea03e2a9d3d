"""The relay to a worker of this host that cannot be reached answers S3's 503 with
Retry-After (it goes back to the client through the sending member), never a bare 503."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import httpx

from gateway.http.workers.relay import WorkerRelay


async def test_an_unreachable_worker_is_s3s_503_with_retry_after(tmp_path: Path) -> None:
    relay = WorkerRelay([str(tmp_path / "worker-0.sock")])  # no worker listens there
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=partial(relay, 0)),
                                     base_url="http://member") as client:
            answer = await client.put("/bucket/key", content=b"body")
            head = await client.head("/bucket/key")
    finally:
        await relay.aclose()
    assert answer.status_code == 503
    assert answer.headers["retry-after"] == "1"
    assert b"<Code>ServiceUnavailable</Code>" in answer.content
    assert str(tmp_path).encode() not in answer.content  # the cause goes to the log
    assert head.status_code == 503 and head.headers["retry-after"] == "1"
