"""The way into the dashboard on a gateway started as it is by default (the status closed
to all but the admin's signature and the status token, which a browser cannot sign).

When no ``--status-token`` is set and the status is not public, ``squall serve`` makes a
random status token for this run (kept in memory only, never written) and its banner
prints the dashboard's address with it in the URL's fragment
(``http://127.0.0.1:9000/_squall/ui#token=...``): a browser sends no fragment to any
server, and the page moves it into the tab's ``sessionStorage`` and out of the address
bar. Whoever sees the gateway's output can read its status while this run lasts, as whoever
sees the first start's output has the admin's secret key.
"""

from __future__ import annotations

import secrets

from gateway.config.settings import Settings

#: the start of a token made for one run (how the banner knows it may print it)
GENERATED_PREFIX = "squall-run-"
PAGE_PATH = "/_squall/ui"
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def with_run_token(settings: Settings) -> Settings:
    """``settings``, with a status token made for this run when the status is closed and
    no token is set."""
    if settings.public_status or settings.status_token is not None:
        return settings
    token = GENERATED_PREFIX + secrets.token_urlsafe(24)
    return settings.model_copy(update={"status_token": token})


def dashboard_line(settings: Settings, scheme: str, port: int) -> str:
    """The banner's line: the dashboard's address and how to get in."""
    host = settings.listen_address.host
    host = "127.0.0.1" if host in _WILDCARDS else f"[{host}]" if ":" in host else host
    url = f"{scheme}://{host}:{port}{PAGE_PATH}"
    token = settings.status_token
    if settings.public_status:
        return f"  dashboard: {url} (status public: --public-status)"
    if token is not None and token.startswith(GENERATED_PREFIX):
        return (f"  dashboard: {url}#token={token} (a status token for this run; "
                "--status-token sets a lasting one)")
    return f"  dashboard: {url} (asks for the status token given with --status-token)"
