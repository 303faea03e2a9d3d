"""Squall's ASGI application for another ASGI server, to measure servers against each
other: settings from ``SQUALL_*`` variables as ``squall serve`` reads them, e.g.

    SQUALL_DATA_DIR=/tmp/g SQUALL_BACKEND=posix:/tmp/g-objects \\
        granian --interface asgi --factory --loop uvloop --port 9100 \\
        loadtests.bench.asgi_app:app

(docs/benchmarks.md, "ASGI servers"). ``squall serve`` itself runs uvicorn.
"""

from __future__ import annotations

from starlette.types import ASGIApp

from gateway.app import build_app
from gateway.auth.credentials import load_or_create
from gateway.components import build_components
from gateway.config.settings import load_settings
from gateway.http.server import configure_logging, tune_gc


def app() -> ASGIApp:
    """The gateway's application, built as ``squall serve`` builds it."""
    settings = load_settings()
    configure_logging(settings)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    credentials = load_or_create(settings.data_dir, settings.access_key, settings.secret_key)
    application = build_app(build_components(settings, credentials))
    tune_gc()
    return application
