"""Helpers shared by the client tests: payloads, digests, CLI runners, S3 error parsing."""

from __future__ import annotations

import base64
import hashlib
import os
import random
import subprocess
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from minio import Minio

from tests.support.server import ACCESS_KEY, SECRET_KEY

MiB = 1024 * 1024
CLI_TIMEOUT = 120.0
S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def payload(size: int, seed: int | str = 0) -> bytes:
    """Deterministic pseudo-random bytes (incompressible, reproducible per seed)."""
    return random.Random(f"{seed}:{size}").randbytes(size)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(MiB), b""):
            h.update(block)
    return h.hexdigest()


def md5_b64(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def multipart_etag(parts: Sequence[bytes]) -> str:
    """The S3 ETag of a completed multipart upload made of ``parts`` (quoted)."""
    digests = b"".join(hashlib.md5(p).digest() for p in parts)
    return f'"{hashlib.md5(digests).hexdigest()}-{len(parts)}"'


def new_bucket_name(prefix: str = "c") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:20]}"


def write_tree(root: Path, files: dict[str, bytes], *, age: float = 3600.0) -> None:
    """Write ``files`` under ``root`` with mtimes ``age`` seconds in the past.

    Sync tools compare local mtimes with LastModified, which listings give to the second;
    files older than the upload keep a second sync from re-sending them.
    """
    when = time.time() - age
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.utime(path, (when, when))


def read_tree(root: Path) -> dict[str, str]:
    """Relative POSIX path -> sha256 of every regular file under ``root``."""
    return {p.relative_to(root).as_posix(): file_sha256(p)
            for p in sorted(root.rglob("*")) if p.is_file()}


@dataclass(frozen=True, slots=True)
class S3XmlError:
    status: int
    code: str
    message: str
    content_type: str


def parse_error(status: int, headers: Mapping[str, str], body: bytes) -> S3XmlError:
    """An S3 ``<Error>`` document; fails the test if the body is not one."""
    root = ET.fromstring(body)
    tag = root.tag.removeprefix(S3_NS)
    assert tag == "Error", body
    code = root.findtext("Code") or root.findtext(f"{S3_NS}Code") or ""
    message = root.findtext("Message") or root.findtext(f"{S3_NS}Message") or ""
    return S3XmlError(status, code, message, headers.get("content-type", ""))


@dataclass
class Cli:
    """Runs one command line tool with a fixed environment and common arguments."""

    argv0: Sequence[str]
    env: dict[str, str]
    cwd: Path

    def __call__(self, *args: str, ok: bool = True,
                 timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([*self.argv0, *args], check=False, env=self.env, cwd=self.cwd,
                              capture_output=True, text=True, timeout=timeout)
        if ok:
            assert proc.returncode == 0, (
                f"{' '.join(args)} exited {proc.returncode}\n"
                f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
        else:
            assert proc.returncode != 0, (
                f"{' '.join(args)} unexpectedly succeeded\nstdout:\n{proc.stdout[-3000:]}")
        return proc

    def binary(self, *args: str, stdin: bytes | None = None,
               timeout: float = CLI_TIMEOUT) -> bytes:
        """Run a command that must succeed with raw bytes on stdin/stdout; returns stdout."""
        proc = subprocess.run([*self.argv0, *args], check=False, env=self.env, cwd=self.cwd,
                              input=stdin, capture_output=True, timeout=timeout)
        assert proc.returncode == 0, (
            f"{' '.join(args)} exited {proc.returncode}\nstderr:\n"
            f"{proc.stderr[-3000:].decode(errors='replace')}")
        return proc.stdout


def _base_env(home: Path) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "PYENV_ROOT", "PYENV_VERSION", "TMPDIR", "SYSTEMROOT")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["HOME"] = str(home)
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


def aws_env(home: Path, access_key: str = ACCESS_KEY,
            secret_key: str = SECRET_KEY) -> dict[str, str]:
    """Environment for ``aws`` that ignores every configuration file of the host."""
    home.mkdir(parents=True, exist_ok=True)
    config, credentials = home / "aws-config", home / "aws-credentials"
    config.write_text("")
    credentials.write_text("")
    return {**_base_env(home),
            "AWS_ACCESS_KEY_ID": access_key, "AWS_SECRET_ACCESS_KEY": secret_key,
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": str(config),
            "AWS_SHARED_CREDENTIALS_FILE": str(credentials), "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_MAX_ATTEMPTS": "1", "AWS_RETRY_MODE": "standard", "AWS_PAGER": ""}


def make_aws(endpoint: str, home: Path, **keys: str) -> Cli:
    return Cli(["aws", "--endpoint-url", endpoint], aws_env(home, **keys), home)


def s3cmd_config(path: Path, endpoint: str, access_key: str = ACCESS_KEY,
                 secret_key: str = SECRET_KEY) -> Path:
    """A minimal s3cmd config for a plain-HTTP, path-style, SigV4 endpoint."""
    host = urlsplit(endpoint).netloc
    path.write_text("\n".join([
        "[default]",
        f"access_key = {access_key}",
        f"secret_key = {secret_key}",
        f"host_base = {host}",
        f"host_bucket = {host}",
        "bucket_location = us-east-1",
        "use_https = False",
        "signature_v2 = False",
        "check_ssl_certificate = False",
        "max_retries = 1",
        "progress_meter = False",
        "",
    ]))
    return path


def make_s3cmd(endpoint: str, home: Path, **keys: str) -> Cli:
    home.mkdir(parents=True, exist_ok=True)
    cfg = s3cmd_config(home / "s3cfg", endpoint, **keys)
    return Cli(["s3cmd", "-c", str(cfg)], _base_env(home), home)




def make_minio(endpoint: str, access_key: str = ACCESS_KEY,
               secret_key: str = SECRET_KEY) -> Minio:
    return Minio(urlsplit(endpoint).netloc, access_key=access_key, secret_key=secret_key,
                 secure=False)
