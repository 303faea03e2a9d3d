"""``/_squall/ui``, its static files and ``/_squall/ui/data`` on a real gateway."""

from __future__ import annotations

import importlib.resources
import re
import uuid
from typing import Any

import httpx
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

ASSETS = ("uPlot.iife.min.js", "uPlot.min.css", "dashboard.js", "dashboard.css")


def signed(url: str, secret: str = SECRET_KEY) -> dict[str, str]:
    request = AWSRequest(method="GET", url=url, data=b"")
    S3SigV4Auth(Credentials(ACCESS_KEY, secret), "s3", "us-east-1").add_auth(request)
    return dict(request.headers.items())


def test_page_references_only_the_gateway(squall: SquallProcess) -> None:
    response = httpx.get(f"{squall.endpoint}/_squall/ui")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    html = response.text
    assert not re.search(r"(?i)(https?:)?//[a-z0-9]", html), "an external URL in the page"
    references = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert {r.split("?")[0] for r in references} >= {f"/_squall/ui/static/{a}" for a in ASSETS}
    assert all(r.startswith("/_squall/ui/static/") or r == "data:," for r in references)
    # The browser is told to load nothing from anywhere else.
    assert "default-src 'self'" in response.headers["content-security-policy"]


@pytest.mark.parametrize("asset", ASSETS)
def test_static_assets_come_from_the_package(squall: SquallProcess, asset: str) -> None:
    response = httpx.get(f"{squall.endpoint}/_squall/ui/static/{asset}")
    assert response.status_code == 200
    shipped = importlib.resources.files("gateway.dashboard").joinpath(f"static/{asset}")
    assert response.content == shipped.read_bytes()


def test_uplot_license_ships_beside_it() -> None:
    license_file = importlib.resources.files("gateway.dashboard").joinpath(
        "static/uPlot.LICENSE")
    assert "MIT License" in license_file.read_text()


def test_data_authorised_exactly_like_status(squall: SquallProcess) -> None:
    """Unsigned, wrongly signed and signed requests get the answer status gets."""
    def answers(target: str) -> list[int]:
        url = squall.endpoint + target
        return [httpx.get(url).status_code,
                httpx.get(url, headers=signed(url, secret="wrong-secret")).status_code,
                httpx.get(url, headers=signed(url)).status_code]

    assert answers("/_squall/ui/data") == answers("/_squall/status")


def test_data_follows_writes_and_records_errors(squall: SquallProcess, s3: Any,
                                                bucket: str) -> None:
    url = f"{squall.endpoint}/_squall/ui/data"
    before = httpx.get(url).json()
    assert before["format"] == 1 and before["ready"] is True
    assert set(before["rates"]) == {"ingest_bytes_per_s", "flush_bytes_per_s",
                                    "writearound_bytes_per_s"}
    s3.put_object(Bucket=bucket, Key="a", Body=b"x" * 100_000)
    missing = f"missing-{uuid.uuid4().hex}"
    with pytest.raises(s3.exceptions.NoSuchKey):
        s3.get_object(Bucket=bucket, Key=missing)
    after = httpx.get(url).json()
    assert after["cache"]["ingest_bytes_total"] >= before["cache"]["ingest_bytes_total"] \
        + 100_000
    assert after["errors_total"] >= before["errors_total"] + 1
    error = next(e for e in after["errors"] if e["resource"] == f"/{bucket}/{missing}")
    assert error["operation"] == "GetObject"
    assert error["code"] == "NoSuchKey" and error["status"] == 404
    assert after["errors"] == sorted(after["errors"], key=lambda e: -e["time"])
    assert httpx.get(url).headers["cache-control"] == "no-store"
