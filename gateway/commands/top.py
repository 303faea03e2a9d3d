"""``squall top``: the dashboard's essentials in the terminal, refreshed every second.

Polls ``GET /_squall/ui/data`` (the document the web page draws; the whole gateway's
with ``--workers N``). The request is signed with the client credentials when they are
set (SQUALL_ACCESS_KEY/SQUALL_SECRET_KEY or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY),
as ``squall sync`` signs its own; the gateway answers it without, like its status.
"""

from __future__ import annotations

import argparse
import ssl
import sys
import time
from datetime import datetime
from typing import Any

import httpx
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from gateway.client.failures import BadAnswer, ClientFailure, exit_status, json_of, reaching
from gateway.client.signing import status_headers
from gateway.client.tls import endpoint_context
from gateway.commands.options import add_gateway_options
from gateway.config.humanize import format_bytes, format_duration
from gateway.dashboard.routes import DATA_PATH
from gateway.dashboard.snapshot import RATE_WINDOW_S

COMMAND = "top"
ERRORS_SHOWN = 8

def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(COMMAND, help="live view of a running gateway in the terminal",
                       description="Cache fill and dirty bytes, ingest and flush rates, "
                                   "flush phase, cost, members and recent errors of a "
                                   "running gateway, refreshed until Ctrl+C.")
    add_gateway_options(p)
    p.add_argument("--interval", type=_interval, default=1.0, metavar="SECONDS",
                   help="refresh period (default 1)")
    p.add_argument("--once", action="store_true", help="print one frame and exit")


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0.2 <= value <= 3600:
        raise argparse.ArgumentTypeError("must be from 0.2 to 3600 seconds")
    return value


class Poller:
    """GETs the dashboard document, signed when credentials are set."""

    def __init__(self, endpoint: str, region: str, *,
                 verify: ssl.SSLContext | bool = True) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.url = self.endpoint + DATA_PATH
        self._region = region
        self._client = httpx.Client(timeout=10.0, verify=verify)

    def fetch(self) -> dict[str, Any]:
        """The dashboard document; ClientFailure when it cannot be read."""
        headers = status_headers(self.url, region=self._region)
        with reaching(self.endpoint):
            response = self._client.get(self.url, headers=headers)
        try:
            doc = json_of(response)
        except BadAnswer as exc:
            raise BadAnswer(f"{self.url} did not answer JSON (not a Squall gateway, or an "
                            "older version without the dashboard)") from exc
        if not isinstance(doc, dict) or doc.get("format") != 1:
            raise BadAnswer(f"{self.url} answered an unknown document")
        return doc

    def close(self) -> None:
        self._client.close()


def run(args: argparse.Namespace) -> int:
    return exit_status(f"squall {COMMAND}", lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    poller = Poller(args.endpoint, args.region, verify=endpoint_context(args.ca_bundle))
    console = Console()
    try:
        doc = poller.fetch()
        if args.once:
            if all(v is None for v in doc["rates"].values()):  # first sample: no rates yet
                time.sleep(RATE_WINDOW_S + 0.1)
                doc = poller.fetch()
            console.print(frame(doc, args.endpoint))
            return 0
        with Live(frame(doc, args.endpoint), console=console, screen=False,
                  auto_refresh=False) as live:
            while True:
                time.sleep(args.interval)
                try:
                    doc = poller.fetch()
                    live.update(frame(doc, args.endpoint), refresh=True)
                except ClientFailure as exc:  # keep the last frame, say what is wrong
                    live.update(Group(frame(doc, args.endpoint),
                                      Text(f"stale: {exc}", style="bold red")), refresh=True)
    except KeyboardInterrupt:
        return 0
    finally:
        poller.close()


# -- rendering ------------------------------------------------------------------------
def size(n: float | None) -> str:
    return "-" if n is None else format_bytes(n)


def rate(n: float | None) -> str:
    return "measuring" if n is None else f"{size(n)}/s"


def duration(seconds: float | None) -> str:
    return format_duration(seconds or 0.0)


def cell(value: Any) -> str:
    """A QoS table cell: floats rounded, nothing for None."""
    if value is None:
        return "-"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def frame(doc: dict[str, Any], endpoint: str) -> RenderableType:
    """One screen: the gateway's figures as rich tables."""
    backend = doc["backend"]
    head = Text.assemble(
        ("Squall ", "bold"), endpoint, "  ",
        ("ready" if doc["ready"] else "starting", "green" if doc["ready"] else "yellow"),
        f"  up {duration(doc['uptime_s'])}",
        f"  {doc['workers']} workers" if doc["workers"] > 1 else "",
        f"  backend {backend['kind']} ",
        ("reachable", "green") if backend["reachable"]
        else (f"unreachable: {backend.get('reason')}", "bold red"),
        f"  {datetime.fromtimestamp(doc['time']).strftime('%H:%M:%S')}")
    parts: list[RenderableType] = [head, _figures(doc)]
    if doc.get("qos"):
        parts.append(_qos(doc["qos"]))
    if doc.get("members"):
        parts.append(_members(doc["members"]))
    parts.append(_errors(doc))
    return Group(*parts)


def _figures(doc: dict[str, Any]) -> Table:
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    rates, cache, cost = doc["rates"], doc.get("cache"), doc.get("cost")
    if cache is None:
        table.add_row("cache", "none (requests go to the backend)")
    else:
        fill = 100 * cache["used_bytes"] / cache["capacity_bytes"] \
            if cache["capacity_bytes"] else 0.0
        elastic = f" (elastic: {cache['elastic_state']})" if cache.get("elastic_state") else ""
        table.add_row("cache fill", f"{fill:.1f} %  {size(cache['used_bytes'])} of "
                      f"{size(cache['capacity_bytes'])} ({cache['mode']})")
        table.add_row("dirty", f"{size(cache['dirty_bytes'])} in {cache['dirty_objects']} "
                      f"objects, oldest {duration(cache['oldest_dirty_age_s'])}")
        table.add_row("flush phase", cache["phase"] + elastic)
    table.add_row("ingest", rate(rates["ingest_bytes_per_s"]))
    table.add_row("flush", rate(rates["flush_bytes_per_s"]) + (
        f"  ({cache['flush_inflight']} in flight, {cache['quarantined_objects']} "
        "quarantined)" if cache is not None else ""))
    if rates["writearound_bytes_per_s"]:
        table.add_row("write-around", rate(rates["writearound_bytes_per_s"]))
    if cache is not None:
        table.add_row("volumes", ", ".join(f"{size(v['size_bytes'])} {v['state']}"
                                           for v in cache["volumes"]) or "none")
    table.add_row("cost", f"{cost['agbs']:.3f} {cost['unit']} (backend "
                  f"{cost['backend_agbs']:.3f}, cache {cost['cache_agbs']:.3f}) over "
                  f"{duration(cost['elapsed_s'])}" if cost else "no cost meter")
    table.add_row("errors", f"{doc['errors_total']} S3 errors, {doc['slowdowns']} SlowDown")
    return table


def _qos(qos: Any) -> Table:
    rows = qos if isinstance(qos, list) else qos.get("buckets", qos)
    if isinstance(rows, dict):
        rows = [{"bucket": b, **(v if isinstance(v, dict) else {"value": v})}
                for b, v in rows.items()]
    rows = [r for r in rows if isinstance(r, dict)]
    columns = list(dict.fromkeys(k for r in rows for k, v in r.items()
                                 if not isinstance(v, dict | list)))
    table = Table(title="QoS gears", title_justify="left")
    for column in columns:
        table.add_column(column.replace("_", " "))
    for r in rows:
        table.add_row(*(cell(r.get(c)) for c in columns))
    return table


def _members(members: list[dict[str, Any]]) -> Table:
    table = Table(title="members", title_justify="left")
    for column in ("member", "health", "key share", "phase", "dirty", "cache used"):
        table.add_column(column)
    style = {"up": "green", "down": "red", "starting": "yellow"}
    for m in members:
        table.add_row(m["name"] + (" *" if m.get("self") else ""),
                      Text(m["health"], style=style.get(m["health"], "yellow")),
                      f"{100 * m['key_share']:.1f} %", m.get("phase") or "-",
                      size(m.get("dirty_bytes")), size(m.get("used_bytes")))
    return table


def _errors(doc: dict[str, Any]) -> RenderableType:
    errors = doc.get("errors", [])[:ERRORS_SHOWN]
    if not errors:
        return Text("recent errors: none", style="dim")
    table = Table(title="recent errors", title_justify="left")
    for column in ("time", "operation", "resource", "code", "status"):
        table.add_column(column)
    for e in errors:
        table.add_row(datetime.fromtimestamp(e["time"]).strftime("%H:%M:%S"),
                      e["operation"] + (f" (worker {e['worker']})" if "worker" in e else ""),
                      e["resource"], e["code"], str(e["status"]))
    return table


def main(argv: list[str] | None = None) -> int:
    """``python -m gateway.commands.top``: the same command outside ``squall``."""
    parser = argparse.ArgumentParser(prog="squall")
    register(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args([COMMAND, *(sys.argv[1:] if argv is None else argv)]))


if __name__ == "__main__":
    sys.exit(main())
