"""A small calibration used by the prediction and CLI tests (values chosen by hand)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

CALIBRATION: dict[str, Any] = {
    "format": "squall-calibration",
    "version": 1,
    "configurations": [
        {"name": "adaptive", "backend": "posix", "providers": 1,
         "backend_bandwidth_mb_s": 33, "backend_size_gb": 50, "cache_bandwidth_mb_s": 128,
         "points": [
             {"cache_gb": 2, "dataset_gb": 3, "throughput_mb_s": 40, "attach_s": 100},
             {"cache_gb": 2, "dataset_gb": 6, "throughput_mb_s": 25, "attach_s": 200},
             {"cache_gb": 4, "dataset_gb": 3, "throughput_mb_s": 80, "attach_s": 60},
             {"cache_gb": 4, "dataset_gb": 6, "throughput_mb_s": 50, "attach_s": 150},
             {"cache_gb": 8, "dataset_gb": 3, "throughput_mb_s": 90, "attach_s": 60},
             {"cache_gb": 8, "dataset_gb": 6, "throughput_mb_s": 60, "attach_s": 150}]},
        {"name": "static-slow", "backend": "blobseer_like", "providers": 4,
         "backend_bandwidth_mb_s": 33, "backend_size_gb": 50, "cache_bandwidth_mb_s": 0,
         "points": [
             {"cache_gb": 0, "dataset_gb": 3, "throughput_mb_s": 33, "attach_s": 0},
             {"cache_gb": 0, "dataset_gb": 6, "throughput_mb_s": 33, "attach_s": 0}]},
    ],
}


@pytest.fixture
def calibration_file(tmp_path: Path) -> Path:
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(CALIBRATION))
    return path
