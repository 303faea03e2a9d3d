"""``GET /_squall/ui/data`` on the shared port of ``squall serve --workers N``: every
worker's document (asked over its Unix socket), merged into the whole gateway's."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from gateway.dashboard.merge import merge
from gateway.dashboard.routes import DATA_PATH, NO_STORE
from gateway.http.workers.links import Answer, WorkerLinks

Handler = Callable[[Scope, Receive, Send], Awaitable[None]]
ASK_TIMEOUT_S = 2.0


def front_routes(links: WorkerLinks, index: int) -> dict[tuple[str, str], Handler]:
    """The routes :class:`~gateway.http.workers.front.WorkerFront` answers for all workers."""

    async def data(scope: Scope, receive: Receive, send: Send) -> None:
        answers = await links.get_all(DATA_PATH, timeout_s=ASK_TIMEOUT_S)
        docs = [_document(a) for a in answers]
        errors = [None if d is not None else a.error or f"HTTP {a.status}"
                  for a, d in zip(answers, docs, strict=True)]
        body = merge(docs, errors, answering=index)
        await JSONResponse(body, headers=NO_STORE)(scope, receive, send)

    return {("GET", DATA_PATH): data, ("HEAD", DATA_PATH): data}


def _document(answer: Answer) -> dict[str, Any] | None:
    if answer.status != 200:
        return None
    try:
        doc = json.loads(answer.body)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None
