"""The gateway's access key pair: from settings, or generated once and kept in the data dir."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import string
from dataclasses import dataclass
from pathlib import Path

CREDENTIALS_FILE = "credentials.json"
_KEY_ALPHABET = string.ascii_uppercase + string.digits


@dataclass(frozen=True, slots=True)
class Credentials:
    access_key: str
    secret_key: str
    generated: bool = False  # True when created by this start (printed once)
    path: Path | None = None  # the file keeping the pair; None: from the settings


def load_or_create(data_dir: Path, access_key: str | None,
                   secret_key: str | None) -> Credentials:
    """Configured credentials, else the stored pair, else a new pair saved with mode 0600."""
    creds = load_or_generate(data_dir, access_key, secret_key)
    if creds.generated:
        save(data_dir, creds)
    return creds


def load_or_generate(data_dir: Path, access_key: str | None,
                     secret_key: str | None) -> Credentials:
    """Configured credentials, else the stored pair, else a new pair (``generated``) that
    is not saved yet: :func:`save` it once the gateway has started. Writes nothing;
    ValueError with a one-line message for a half-configured pair or a damaged file."""
    if access_key or secret_key:
        if not (access_key and secret_key):
            raise ValueError("set both SQUALL_ACCESS_KEY and SQUALL_SECRET_KEY, or neither")
        return Credentials(access_key, secret_key)
    path = data_dir / CREDENTIALS_FILE
    try:
        stored = json.loads(path.read_text())
        return Credentials(stored["access_key"], stored["secret_key"], path=path)
    except FileNotFoundError:
        pass
    except NotADirectoryError as exc:
        raise ValueError(f"data directory {data_dir} is not a directory") from exc
    except PermissionError as exc:
        raise ValueError(f"cannot read {path}: permission denied") from exc
    except (ValueError, KeyError, TypeError, IsADirectoryError) as exc:
        raise ValueError(f"{path} is damaged; remove it to generate a new key pair") from exc
    return Credentials(
        access_key="SQ" + "".join(secrets.choice(_KEY_ALPHABET) for _ in range(18)),
        secret_key=secrets.token_urlsafe(30),
        generated=True,
        path=path,
    )


def save(data_dir: Path, creds: Credentials) -> Path:
    """Write the pair to ``<data_dir>/credentials.json`` (mode 0600, atomically)."""
    path = data_dir / CREDENTIALS_FILE
    write_private(path, json.dumps({"access_key": creds.access_key,
                                    "secret_key": creds.secret_key}).encode())
    return path


def write_private(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically: a mode-0600 temporary file, fsynced,
    renamed; the directory is created (0700) if needed and fsynced."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
