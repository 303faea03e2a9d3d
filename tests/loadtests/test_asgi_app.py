"""The application factory for other ASGI servers builds the gateway from SQUALL_*."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.server import ACCESS_KEY, SECRET_KEY

PROBE = """
import asyncio
from loadtests.bench.asgi_app import app

async def main():
    application = app()
    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent = []
    async def receive():
        return messages.pop(0)
    async def send(message):
        sent.append(message["type"])
    await application({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send)
    print(" ".join(sent))

asyncio.run(main())
"""


def test_factory_starts_and_stops_the_gateway(tmp_path: Path) -> None:
    env = {**os.environ, "SQUALL_DATA_DIR": str(tmp_path / "data"),
           "SQUALL_BACKEND": f"posix:{tmp_path / 'objects'}",
           "SQUALL_ACCESS_KEY": ACCESS_KEY, "SQUALL_SECRET_KEY": SECRET_KEY}
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert (tmp_path / "data").is_dir()
