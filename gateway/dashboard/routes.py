"""The dashboard's routes on the admin application: the page, its static files (shipped
in the package: the page works offline) and the data it polls."""

from __future__ import annotations

import importlib.metadata
import importlib.resources
from typing import TYPE_CHECKING

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from gateway.dashboard.snapshot import ProcessView

if TYPE_CHECKING:
    from gateway.components import Components

PAGE_PATH = "/_squall/ui"
DATA_PATH = "/_squall/ui/data"
STATIC_PATH = "/_squall/ui/static"
NO_STORE = {"cache-control": "no-store"}
# Everything from this gateway: nothing is fetched from anywhere else.
PAGE_HEADERS = {"content-security-policy": "default-src 'self'; img-src 'self' data:; "
                "style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
                "x-content-type-options": "nosniff", "cache-control": "no-cache"}


def page() -> str:
    """The page's HTML, asset URLs tagged with the package version (cache busting)."""
    try:
        version = importlib.metadata.version("squall")
    except importlib.metadata.PackageNotFoundError:
        version = "dev"
    template = importlib.resources.files("gateway.dashboard").joinpath(
        "templates/index.html").read_text(encoding="utf-8")
    return template.replace("{{version}}", version)


def mount_dashboard(app: FastAPI, components: Components) -> None:
    """Add ``/_squall/ui`` (page), ``/_squall/ui/static/*`` and ``/_squall/ui/data``.

    Open like ``/_squall/status`` (whose figures the data repeats)."""
    html = page()
    view = ProcessView(components)

    @app.get(PAGE_PATH)
    async def dashboard_page() -> HTMLResponse:
        return HTMLResponse(html, headers=PAGE_HEADERS)

    @app.get(DATA_PATH)
    async def dashboard_data() -> JSONResponse:
        return JSONResponse(view.data(), headers=NO_STORE)

    app.mount(STATIC_PATH, StaticFiles(packages=[("gateway.dashboard", "static")]),
              name="dashboard-static")
