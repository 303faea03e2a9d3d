from __future__ import annotations

from pathlib import Path

import pytest

from loadtests.locust_csv import parse_stats, read_stats

HEADER = (
    "Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,"
    "Min Response Time,Max Response Time,Average Content Size,Requests/s,Failures/s,"
    "50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,100%"
)
STATS = f"""{HEADER}
PUT,PutObject,10,1,16,15.7,10.5,21.3,1048576.0,4.0,0.4,16,19,20,20,21,21,21,21,21,21,21
BURST,checkpoint phase 1,1,0,22.4,22.4,22.4,22.4,4194304.0,0.5,0.0,22,22,22,22,22,22,22,22,22,22,22
GET,GetObject,0,0,0,0,0,0,0,0.0,0.0,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A
,Aggregated,11,1,16,15.9,10.5,22.4,1334444.2,4.5,0.4,16,20,20,20,21,22,22,22,22,22,22
"""


def test_parse_stats_rows_and_total() -> None:
    stats = parse_stats(STATS)
    assert stats.names == {"PutObject", "checkpoint phase 1", "GetObject"}
    put = stats.row("PutObject", "PUT")
    assert (put.requests, put.failures, put.median_ms, put.rps) == (10, 1, 16.0, 4.0)
    assert put.percentiles_ms["99%"] == 21.0
    assert put.throughput_mib_s == pytest.approx(4.0)
    assert stats.row("checkpoint phase 1").type == "BURST"
    assert stats.row("GetObject").percentiles_ms == {}  # "N/A" when nothing was measured
    assert stats.total is not None and stats.total.requests == 11
    assert stats.failures == 1


def test_row_lookup_errors_name_the_rows() -> None:
    with pytest.raises(KeyError, match="PutObject"):
        parse_stats(STATS).row("NoSuchOperation")
    with pytest.raises(KeyError):
        parse_stats(STATS).row("PutObject", "GET")


def test_read_stats_from_prefix(tmp_path: Path) -> None:
    (tmp_path / "run_stats.csv").write_text(STATS, encoding="utf-8")
    assert read_stats(tmp_path / "run").row("PutObject").requests == 10


def test_failures_without_aggregated_row() -> None:
    text = "\n".join(STATS.splitlines()[:3])
    stats = parse_stats(text)
    assert stats.total is None
    assert stats.failures == 1
