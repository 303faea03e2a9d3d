"""The cores a gateway may use: CPU affinity bounded by a cgroup v2 quota."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.config.cores import usable_cores


def test_no_quota_file_gives_the_affinity(tmp_path: Path) -> None:
    assert usable_cores(tmp_path / "absent") == len(os.sched_getaffinity(0))


@pytest.mark.parametrize(("text", "limit"), [
    ("max 100000\n", None), ("150000 100000\n", 2), ("50000 100000\n", 1),
    ("100000 100000\n", 1), ("garbage\n", None), ("0 100000\n", None), ("a b\n", None),
])
def test_a_quota_bounds_the_affinity(tmp_path: Path, text: str, limit: int | None) -> None:
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text(text)
    affinity = len(os.sched_getaffinity(0))
    assert usable_cores(cpu_max) == (affinity if limit is None else min(affinity, limit))
