"""loadtests.bench.fuse_mpi: the job's layout, the table, and one tiny real run (gateway,
``squall mount``, mpirun with 2 ranks, every file verified)."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from loadtests.bench.fuse import Column, MiB, fuse_unavailable
from loadtests.bench.fuse_mpi import Job, Report, main, mpi_unavailable
from loadtests.bench.mpi_writer import n1_calls, n1_range, pieces, total_bytes
from loadtests.mpi.content import layout


def test_n1_ranges_are_contiguous_disjoint_and_cover_the_file() -> None:
    size = 3 * MiB
    ranges = [n1_range(4, r, size) for r in range(4)]
    assert ranges[0] == (0, size)
    for (offset, length), (following, _) in pairwise(ranges):
        assert offset + length == following
    assert sum(n for _, n in ranges) == total_bytes("n1", 4, 1, size)
    assert [(r, o, n) for r, o, n in layout(4, 1, size)] == [
        (r, o, n) for r, (o, n) in enumerate(ranges)]


def test_every_rank_makes_the_same_number_of_collective_calls_of_about_one_mib() -> None:
    size = 256 * MiB
    assert n1_calls(size) == 256 and n1_calls(1000) == 1
    for rank in range(4):
        _, length = n1_range(4, rank, size)
        cut = pieces(length, n1_calls(size))
        assert len(cut) == 256 and sum(n for _, n in cut) == length
        assert all(MiB <= n <= MiB + 64 for _, n in cut)
        assert all(a + n == b for (a, n), (b, _) in pairwise(cut))


def test_table_has_the_two_modes_the_three_targets_and_the_two_ratios() -> None:
    job = Job(4, 256 * MiB)
    report = Report(job, (Column("local dir", {"nn": 800.0, "n1": 400.0}),
                          Column("squall mount", {"nn": 400.0, "n1": 100.0}),
                          Column("s3fs", {"nn": "s3fs is not installed",
                                          "n1": "s3fs is not installed"})),
                    ("s3fs: s3fs is not installed",), verified=4)
    rows = report.rows()
    assert rows[0] == ["checkpoint", "local dir MiB/s", "squall mount MiB/s", "s3fs MiB/s",
                       "squall / local", "squall / s3fs"]
    assert rows[1] == ["N-N (4 x 256 MiB, a file per rank)", "800", "400", "n/a", "0.50x", "-"]
    assert rows[2] == ["N-1 (4 x 256 MiB, one shared file)", "400", "100", "n/a", "0.25x", "-"]
    lines = report.markdown().splitlines()
    assert len({len(line) for line in lines[:4]}) == 1
    assert lines[-2:] == ["* s3fs: s3fs is not installed",
                          ("* verified: 4 runs, every file or object with the expected size "
                           "and SHA-256")]


@pytest.mark.skipif(fuse_unavailable() is not None, reason=f"no FUSE: {fuse_unavailable()}")
@pytest.mark.skipif(mpi_unavailable() is not None, reason=f"no MPI: {mpi_unavailable()}")
@pytest.mark.timeout(240)
def test_tiny_run_prints_the_table_and_verifies_every_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--ranks", "2", "--size-mib", "2", "--no-s3fs", "--timeout", "120",
            "--workdir", str(tmp_path)]
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "$ python -m loadtests.bench.fuse_mpi " + " ".join(argv)
    table = [line for line in lines if line.startswith("|")]
    assert len(table) == 4 and len({len(line) for line in table}) == 1
    for row, mode in zip(table[2:], ("N-N", "N-1"), strict=True):
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[0].startswith(f"{mode} (2 x 2 MiB")
        assert float(cells[1]) > 0 and float(cells[2]) > 0  # local dir, squall mount
        assert cells[3] == "n/a" and cells[4].endswith("x") and cells[5] == "-"
    assert "* s3fs: not run (--no-s3fs)" in lines
    assert "* verified: 4 runs, every file or object with the expected size and SHA-256" in lines
    assert not any(p.is_mount() for p in tmp_path.iterdir())  # everything unmounted
