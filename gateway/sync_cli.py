"""``squall sync``: wait until everything dirty at the gateway is on the backend."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import urllib.parse
from typing import Any

import httpx
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("sync", help="wait until all dirty data is flushed to the backend",
                       description="Return once everything that was dirty when it was "
                                   "called is on the backend. Credentials as for S3 "
                                   "clients: SQUALL_ACCESS_KEY/SQUALL_SECRET_KEY or "
                                   "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY.")
    p.add_argument("--endpoint", default="http://127.0.0.1:9000", help="gateway URL")
    p.add_argument("--bucket", help="only this bucket")
    p.add_argument("--region", default="us-east-1")


def _credentials() -> Credentials:
    access = os.environ.get("SQUALL_ACCESS_KEY") or os.environ.get("AWS_ACCESS_KEY_ID")
    secret = os.environ.get("SQUALL_SECRET_KEY") or os.environ.get("AWS_SECRET_ACCESS_KEY")
    if not access or not secret:
        raise ValueError("no credentials: set SQUALL_ACCESS_KEY and SQUALL_SECRET_KEY")
    return Credentials(access, secret)


def run(args: argparse.Namespace) -> int:
    try:
        creds = _credentials()
    except ValueError as exc:
        print(f"squall sync: {exc}", file=sys.stderr)
        return 2
    query = f"?{urllib.parse.urlencode({'bucket': args.bucket})}" if args.bucket else ""
    url = f"{args.endpoint.rstrip('/')}/_squall/sync{query}"
    request = AWSRequest(method="POST", url=url, data=b"")
    request.headers["x-amz-content-sha256"] = hashlib.sha256(b"").hexdigest()
    S3SigV4Auth(creds, "s3", args.region).add_auth(request)
    tty = sys.stderr.isatty()
    last: dict[str, Any] = {}
    try:
        with httpx.stream("POST", url, headers=dict(request.headers.items()),
                          timeout=httpx.Timeout(30.0, read=None)) as response:
            if response.status_code != 200:
                response.read()
                print(f"squall sync: {response.status_code} {response.text}", file=sys.stderr)
                return 1
            for line in response.iter_lines():
                if not line.strip():
                    continue
                last = json.loads(line)
                if tty and "flushed" not in last:
                    done, total = int(last.get("done", 0)), int(last.get("total", 0))
                    share = 100 * done / total if total else 100.0
                    print(f"\rflushing: {done / 2**20:.1f} / {total / 2**20:.1f} MiB "
                          f"({share:.0f}%)", end="", file=sys.stderr, flush=True)
    except httpx.HTTPError as exc:
        print(f"squall sync: cannot reach {args.endpoint}: {exc}", file=sys.stderr)
        return 1
    if tty:
        print(file=sys.stderr)
    if last.get("flushed") is True:
        print(f"flushed: {int(last.get('total', 0)) / 2**20:.1f} MiB on the backend")
        return 0
    print(f"squall sync: not flushed: {last.get('error')} {last.get('message')}",
          file=sys.stderr)
    for held in last.get("quarantined", []):
        print(f"  {held['bucket']}/{held['key']}: {held['error']} "
              f"({held['attempts']} attempts)", file=sys.stderr)
    return 1
