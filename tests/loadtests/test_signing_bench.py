"""The signing benchmark runs and prints one row per request (its figures are not
checked: speed is measured by the benchmark, not asserted)."""

from __future__ import annotations

import pytest

from loadtests.bench.signing import REQUESTS, main


def test_prints_a_row_per_request(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--number", "5", "--repeat", "1"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + len(REQUESTS)  # the header, then one per request
    assert all(name in "".join(rows) for name in REQUESTS)
