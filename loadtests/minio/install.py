"""Which MinIO server Squall is tested against, and where to find it.

``scripts/setup.sh`` installs exactly this version with ``go install`` (MinIO publishes no
semantic-version tags, so the pin is a Go pseudo-version: a commit of its default branch).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

MINIO_MODULE = "github.com/minio/minio"
MINIO_VERSION = "v0.0.0-20260212201848-7aac2a2c5b7c"
INSTALL_HINT = f"scripts/setup.sh installs it: go install {MINIO_MODULE}@{MINIO_VERSION}"


def find_minio() -> str | None:
    """The ``minio`` binary on PATH, else in Go's install directory; None if absent."""
    found = shutil.which("minio")
    if found:
        return found
    gobin = Path(os.environ.get("GOBIN") or Path.home() / "go" / "bin") / "minio"
    return str(gobin) if gobin.is_file() and os.access(gobin, os.X_OK) else None


def missing_reason() -> str | None:
    """Why MinIO cannot be started here (a skip reason), or None when it can."""
    return None if find_minio() else f"the minio server is not installed ({INSTALL_HINT})"
