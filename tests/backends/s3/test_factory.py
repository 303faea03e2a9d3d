"""``s3:URL?options``: parsing, validation messages, credentials from the environment."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from backends.registry import BackendOptions
from backends.s3 import S3Backend, S3Config, parse_config
from backends.s3.factory import create


def test_defaults() -> None:
    config = parse_config("http://127.0.0.1:9000", environ={})
    assert config == S3Config(endpoint="http://127.0.0.1:9000")
    assert (config.region, config.addressing, config.bucket, config.prefix) == (
        "us-east-1", "path", None, "")
    assert config.access_key is None and config.secret_key is None


def test_all_options() -> None:
    config = parse_config(
        "https://s3.eu-west-1.amazonaws.com/?region=eu-west-1&addressing=virtual"
        "&bucket=shared&prefix=squall/&part_size=16777216&concurrency=8&max_connections=64"
        "&retries=5&connect_timeout=2.5&read_timeout=30&list_concurrency=4",
        environ={"SQUALL_UPSTREAM_ACCESS_KEY": "AK", "SQUALL_UPSTREAM_SECRET_KEY": "SK"})
    assert config == S3Config(
        endpoint="https://s3.eu-west-1.amazonaws.com", region="eu-west-1",
        addressing="virtual", bucket="shared", prefix="squall/", part_size=16 << 20,
        concurrency=8, max_connections=64, retries=5, connect_timeout=2.5, read_timeout=30.0,
        list_concurrency=4, access_key="AK", secret_key="SK")


@pytest.mark.parametrize(("args", "message"), [
    ("", "http(s) endpoint URL"),
    ("ftp://host", "http(s) endpoint URL"),
    ("127.0.0.1:9000", "http(s) endpoint URL"),
    ("http://", "http(s) endpoint URL"),
    ("http://host:99999", "invalid port"),
    ("http://host/some/path", "without a path"),
    ("http://user:pw@host", "without a path, user"),
    ("http://host?colour=blue", "unknown s3 backend option 'colour'"),
    ("http://host?region=a&region=b", "given twice"),
    ("http://host?region=", "region= must not be empty"),
    ("http://host?addressing=sideways", "must be path, virtual or auto"),
    ("http://host?bucket=", "must be an upstream bucket name"),
    ("http://host?bucket=a/b", "must be an upstream bucket name"),
    ("http://host?prefix=p/", "prefix= needs bucket="),
    ("http://host?part_size=1024", "must be >= 5242880"),
    ("http://host?part_size=big", "is not an integer"),
    ("http://host?concurrency=0", "must be >= 1"),
    ("http://host?read_timeout=-1", "must be > 0"),
    ("http://host?connect_timeout=soon", "is not a number"),
])
def test_bad_arguments(args: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_config(args, environ={})


def test_half_credentials_refused() -> None:
    with pytest.raises(ValueError, match="set both SQUALL_UPSTREAM_ACCESS_KEY"):
        parse_config("http://host", environ={"SQUALL_UPSTREAM_ACCESS_KEY": "AK"})


async def test_factory_builds_without_connecting(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQUALL_UPSTREAM_ACCESS_KEY", "AK")
    monkeypatch.setenv("SQUALL_UPSTREAM_SECRET_KEY", "SK")
    backend = create("http://127.0.0.1:1?bucket=b&prefix=p/",
                     BackendOptions(data_dir=tmp_path, min_part_size=123))
    assert isinstance(backend, S3Backend)
    assert backend.config.min_part_size == 123
    assert (backend.config.bucket, backend.config.prefix) == ("b", "p/")
    assert (backend.config.access_key, backend.config.secret_key) == ("AK", "SK")
    await backend.aclose()  # never connected: closing is still fine


def test_factory_rejects_bad_args(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown s3 backend option"):
        create("http://host?nope=1", BackendOptions(data_dir=tmp_path))
