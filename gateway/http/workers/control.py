"""The line protocol between ``squall serve --workers N`` and each worker process.

One stream socket pair per worker (the worker gets its end as an inherited descriptor).
The parent first sends one JSON line (the worker's settings and the workers' socket
paths), then commands; the worker reports its state. Secrets travel here, never in the
command line or the environment. A worker whose parent goes away (EOF) stops by itself.

parent -> worker: ``{"settings": {...}, "sockets": [...]}``, ``drain``, ``stop``
worker -> parent: ``ready``, ``drained``, ``error <exit code> <message>``
"""

from __future__ import annotations

import json
import socket
from typing import Any

READY = "ready"
DRAIN = "drain"  # stop taking requests on the shared port; finish those in flight
DRAINED = "drained"
STOP = "stop"  # every worker has drained: stop serving the others, close the cache
ERROR = "error"


def read_config(sock: socket.socket) -> dict[str, Any]:
    """The first line, read without buffering past it (commands follow later)."""
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = sock.recv(1)
        if not chunk:
            raise EOFError("the parent process closed the control socket")
        data += chunk
    config = json.loads(data)
    if not isinstance(config, dict):
        raise ValueError("the worker configuration is not a JSON object")  # noqa: TRY004
    return config


def error_line(code: int, message: str) -> bytes:
    return f"{ERROR} {code} {' '.join(message.split())}\n".encode()


def parse_error(line: str) -> tuple[int, str]:
    """``(exit code, message)`` of an ``error`` line."""
    _, _, rest = line.partition(" ")
    code, _, message = rest.partition(" ")
    return (int(code) if code.isdigit() else 1), message
