"""``squall cost | predict | advise``: tables, JSON, and bad input (exit 2, no traceback)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.commands import cost as cli

APP_ARGS = ["--nodes", "2", "--iterations", "100", "--iteration-time", "10",
            "--checkpoints", "3", "--checkpoint-size", "3"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_predict_table(capsys: pytest.CaptureFixture[str], calibration_file: Path) -> None:
    code, out, err = run(capsys, "predict", "--calibration", str(calibration_file),
                         *APP_ARGS, "--configuration", "adaptive", "--cache-size", "2", "4")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["configuration", "M"]
    assert "1225.0" in lines[1] and "4,196,100" in lines[1]
    assert "1112.5" in lines[2] and "3,855,570" in lines[2]


def test_advise_table_and_json(capsys: pytest.CaptureFixture[str],
                               calibration_file: Path) -> None:
    code, out, err = run(capsys, "advise", "--calibration", str(calibration_file), *APP_ARGS,
                         "--deadline", "1105")
    assert code == 0, err
    assert "recommended: adaptive with M(S_c) = 8 GB" in out
    assert "static-slow: no cache size meets the deadline" in out
    code, out, _ = run(capsys, "advise", "--calibration", str(calibration_file), *APP_ARGS,
                       "--json")
    doc = json.loads(out)
    assert code == 0 and doc["recommended"]["cache_gb"] == 4
    assert [r["configuration"] for r in doc["ranking"]] == ["adaptive", "static-slow"]


def test_advise_with_no_feasible_size(capsys: pytest.CaptureFixture[str],
                                      calibration_file: Path) -> None:
    code, _, err = run(capsys, "advise", "--calibration", str(calibration_file), *APP_ARGS,
                       "--deadline", "10")
    assert code == 3 and "no configuration meets the deadline" in err


def test_advise_plot(capsys: pytest.CaptureFixture[str], calibration_file: Path,
                     tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "advice.png"
    code, _, err = run(capsys, "advise", "--calibration", str(calibration_file), *APP_ARGS,
                       "--plot", str(png))
    assert code == 0, err
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("extra,message", [
    (["--cache-size", "10"], "cache size 10 GB outside"),
    (["--cache-size", "2", "--configuration", "nope"], "no configuration named nope"),
    (["--cache-size", "2", "--nodes", "0"], "nodes must be >= 1"),
])
def test_predict_bad_input(capsys: pytest.CaptureFixture[str], calibration_file: Path,
                           extra: list[str], message: str) -> None:
    code, _, err = run(capsys, "predict", "--calibration", str(calibration_file), *APP_ARGS,
                       *extra)
    assert code == 2
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("content,message", [
    (None, "cannot read"),
    ("{not json", "is not JSON"),
    ('{"format": "squall-calibration", "version": 1}', "configurations: Field required"),
])
def test_bad_calibration_file(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                              content: str | None, message: str) -> None:
    path = tmp_path / "c.json"
    if content is not None:
        path.write_text(content)
    code, _, err = run(capsys, "advise", "--calibration", str(path), *APP_ARGS)
    assert code == 2 and message in err and "Traceback" not in err


@pytest.mark.parametrize("flag,value", [("--checkpoint-size", "0"),
                                        ("--iteration-time", "-1"),
                                        ("--iterations", "many")])
def test_bad_numbers_are_argparse_errors(capsys: pytest.CaptureFixture[str],
                                         calibration_file: Path, flag: str,
                                         value: str) -> None:
    args = [a for a in APP_ARGS]
    args[args.index(flag) + 1] = value
    code, _, err = run(capsys, "advise", "--calibration", str(calibration_file), *args)
    assert code == 2 and "Traceback" not in err


COST = {"unit": "AGBs", "agbs": 11450.0, "backend_agbs": 8250.0, "cache_agbs": 3200.0,
        "cache_gb_seconds": 25.0, "elapsed_s": 5.0, "samples": 2, "interval_s": 5.0,
        "backend_bandwidth_mb_s": 33, "backend_size_gb": 50, "cache_bandwidth_mb_s": 128,
        "nodes": 1, "cache_size_bytes": 10**10,
        "series": {"elapsed_s": [0.0, 5.0], "cache_size_bytes": [0, 10**10],
                   "cache_used_bytes": [0, 1], "dirty_bytes": [0, 1],
                   "ingest_rate_bytes_per_s": [0.0, 1e6], "cost_agbs": [0.0, 11450.0]}}


def fake_status(monkeypatch: pytest.MonkeyPatch, body: dict[str, Any]) -> None:
    def get(url: str, **_: Any) -> httpx.Response:
        return httpx.Response(200, json=body, request=httpx.Request("GET", url))
    monkeypatch.setattr(httpx, "get", get)


def test_cost_report_and_csv(capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_status(monkeypatch, {"ready": True, "cost_agbs": 11450.0, "cost": COST})
    code, out, err = run(capsys, "cost", "--endpoint", "http://gw", "--csv",
                         str(tmp_path / "c.csv"))
    assert code == 0, err
    assert "11,450.0 AGBs over 5 s" in out and "cache size now M(t)     : 10 GB" in out
    assert (tmp_path / "c.csv").read_text().splitlines()[-1].endswith(",11450.0")


def test_cost_without_meter(capsys: pytest.CaptureFixture[str],
                            monkeypatch: pytest.MonkeyPatch) -> None:
    fake_status(monkeypatch, {"ready": True})
    code, _, err = run(capsys, "cost", "--endpoint", "http://gw")
    assert code == 1 and "no cost meter" in err


def test_cost_unreachable(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "cost", "--endpoint", "http://127.0.0.1:1")
    assert code == 1 and "Traceback" not in err
    assert err == "squall cost: cannot reach http://127.0.0.1:1: Connection refused\n"


def test_predict_with_the_experience_schedule(capsys: pytest.CaptureFixture[str],
                                              calibration_file: Path) -> None:
    args = ["predict", "--calibration", str(calibration_file), "--configuration", "adaptive",
            *APP_ARGS]
    code, out, err = run(capsys, *args, "--init-size", "4", "--init-cache-size", "8",
                         "--experience", "--json")
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["cache_gb"] == 3 and row["init_time_s"] == pytest.approx(50.0)
    code, _, err = run(capsys, *args, "--experience")
    assert code == 2 and "--init-cache-size" in err
    code, _, err = run(capsys, *args)
    assert code == 2 and "either --cache-size or --experience" in err
