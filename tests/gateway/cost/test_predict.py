"""III-C/D prediction and advice against hand-computed values.

Application: n=2 nodes, I=100 iterations of I_t=10 s, K=3 checkpoints of S_c=3 GB.
adaptive: B_b=33 MB/s, N=50 GB (B_b*N = 1650), B_c=128 MB/s. With M=2, B(3)=40 MB/s:
T = 1000 + 3*3000/40 = 1225 s; C = 1650*1225 + 3*128*2*D(3) with D(3)=100 s.
"""

from __future__ import annotations

import copy

import pytest

from gateway.cost.calibration import CalibrationError, parse_calibration
from gateway.cost.predict import Application, advise, completion_time, predict

from .conftest import CALIBRATION

ADAPTIVE, STATIC = parse_calibration(CALIBRATION)
APP = Application(nodes=2, iterations=100, iteration_s=10, checkpoints=3, checkpoint_gb=3)


def test_completion_time() -> None:
    assert completion_time(iterations=100, iteration_s=10, checkpoints=3, checkpoint_gb=3,
                           throughput_mb_s=40) == 1225.0


def test_interpolation_in_x_then_in_m() -> None:
    assert ADAPTIVE.throughput(3, 4) == 80
    # x=4.5 at M=2: (40+25)/2 = 32.5; at M=4: (80+50)/2 = 65; M=3 halfway: 48.75
    assert ADAPTIVE.throughput(4.5, 3) == 48.75
    assert ADAPTIVE.attach(4.5, 3) == 127.5  # (150 + 105) / 2
    assert ADAPTIVE.cache_sizes() == [2, 4, 8]


@pytest.mark.parametrize("x,m,message", [(7, 2, "dataset size 7 GB outside"),
                                         (2, 4, "dataset size 2 GB outside"),
                                         (3, 1, "cache size 1 GB outside"),
                                         (3, 10, "cache size 10 GB outside")])
def test_no_extrapolation(x: float, m: float, message: str) -> None:
    with pytest.raises(CalibrationError, match=message):
        ADAPTIVE.throughput(x, m)


def test_predict_each_cache_size() -> None:
    p2, p4, p8 = (predict(APP, ADAPTIVE, m) for m in (2, 4, 8))
    # C = B_b*N*T + K*B_c*M*D(S_c)
    assert (p2.time_s, p2.cost_per_node_agbs) == (1225.0, 1650 * 1225 + 3 * 128 * 2 * 100)
    assert p2.cost_agbs == 4_196_100.0
    assert (p4.time_s, p4.cost_agbs) == (1112.5, 2 * (1650 * 1112.5 + 3 * 128 * 4 * 60))
    assert p4.cost_agbs == 3_855_570.0
    assert (p8.time_s, p8.cost_agbs) == (1100.0, 3_998_640.0)


def test_predict_with_an_initial_dump() -> None:
    app = Application(nodes=2, iterations=100, iteration_s=10, checkpoints=3, checkpoint_gb=3,
                      init_gb=6, init_cache_gb=4)
    p = predict(app, ADAPTIVE, 2)
    # S_i/B_4(6) = 6000/50 = 120 s; B_c*M(S_i)*D_4(6) = 128*4*150
    assert p.time_s == 1225.0
    assert p.cost_per_node_agbs == 1650 * (1225 + 120) + 128 * 4 * 150 + 3 * 128 * 2 * 100
    assert p.cost_per_node_agbs == 2_372_850.0


def test_compute_slowdown_counts_for_each_compute_phase_after_a_burst() -> None:
    """P = 4 s at every point: the phase after the initial dump and those after the first
    K-1 checkpoints lose it (the last checkpoint's drain overlaps no compute)."""
    doc = copy.deepcopy(CALIBRATION)
    for point in doc["configurations"][0]["points"]:
        point["compute_slowdown_s"] = 4.0
    slowed, _ = parse_calibration(doc)
    assert slowed.slowdown(4.5, 3) == 4.0
    app = Application(nodes=2, iterations=100, iteration_s=10, checkpoints=3, checkpoint_gb=3,
                      init_gb=6, init_cache_gb=4)
    p = predict(app, slowed, 2)
    assert p.compute_slowdown_s == 12.0
    assert p.time_s == 1225.0 + 12.0
    assert p.cost_per_node_agbs == 1650 * (1237 + 120) + 128 * 4 * 150 + 3 * 128 * 2 * 100
    # no compute, nothing to slow down; without the field, P = 0
    assert predict(Application(nodes=2, iterations=0, iteration_s=10, checkpoints=3,
                               checkpoint_gb=3), slowed, 2).compute_slowdown_s == 0.0
    assert predict(app, ADAPTIVE, 2).compute_slowdown_s == 0.0


def test_static_configuration_has_no_cache_term() -> None:
    p = predict(APP, STATIC, 0)
    assert p.time_s == pytest.approx(1000 + 9000 / 33)
    assert p.cost_agbs == pytest.approx(4_200_000.0)  # 2 * 1650 * T


def test_advise_without_deadline_picks_minimal_cost() -> None:
    advice = advise(APP, [ADAPTIVE, STATIC])
    assert [(p.configuration, p.cache_gb) for p in advice.candidates] == [
        ("adaptive", 2), ("adaptive", 4), ("adaptive", 8), ("static-slow", 0)]
    assert advice.recommended is not None
    assert (advice.recommended.configuration, advice.recommended.cache_gb) == ("adaptive", 4)
    # perf/cost 1/(T*C_a): adaptive 1/(1112.5*3855570) beats static 1/(1272.7*4.2e6)
    assert [p.configuration for p in advice.ranking] == ["adaptive", "static-slow"]


def test_advise_under_a_deadline() -> None:
    advice = advise(APP, [ADAPTIVE, STATIC], deadline_s=1105)  # only M=8 is fast enough
    assert advice.recommended is not None and advice.recommended.cache_gb == 8
    assert advice.best_per_configuration["static-slow"] is None
    assert [p.configuration for p in advice.ranking] == ["adaptive"]
    assert [p.meets_deadline for p in advice.candidates] == [False, False, True, False]
    nothing = advise(APP, [ADAPTIVE], deadline_s=1000)
    assert nothing.recommended is None and nothing.ranking == []


def test_advise_skips_sizes_outside_the_calibration() -> None:
    advice = advise(APP, [ADAPTIVE], cache_sizes=[3, 10])
    assert [p.cache_gb for p in advice.candidates] == [3]
    assert len(advice.skipped) == 1 and "cache size 10 GB" in advice.skipped[0]


@pytest.mark.parametrize("kwargs", [{"nodes": 0}, {"checkpoint_gb": 0},
                                    {"iteration_s": float("nan")}, {"checkpoints": -1}])
def test_bad_application(kwargs: dict[str, float]) -> None:
    base = {"iterations": 1, "iteration_s": 1.0, "checkpoints": 1, "checkpoint_gb": 1.0}
    with pytest.raises(ValueError):
        Application(**(base | kwargs))  # type: ignore[arg-type]


def test_bad_deadline() -> None:
    with pytest.raises(ValueError, match="deadline"):
        advise(APP, [ADAPTIVE], deadline_s=0)


@pytest.mark.parametrize("mutate,message", [
    (lambda d: d.update(version=2), "version"),
    (lambda d: d.update(configurations=[]), "configurations"),
    (lambda d: d["configurations"][0]["points"][0].update(throughput_mb_s=0), "throughput"),
    (lambda d: d["configurations"][0]["points"].append(
        dict(d["configurations"][0]["points"][0])), "same cache_gb"),
    (lambda d: d["configurations"][1].update(name="adaptive"), "unique"),
    (lambda d: d["configurations"][0].update(colour="red"), "colour"),
    (lambda d: d["configurations"][0]["points"][0].update(compute_slowdown_s=-1),
     "compute_slowdown_s"),
])
def test_bad_calibration(mutate: object, message: str) -> None:
    doc = copy.deepcopy(CALIBRATION)
    mutate(doc)  # type: ignore[operator]
    with pytest.raises(CalibrationError, match=message):
        parse_calibration(doc)


def test_schedule_of_cache_sizes_per_checkpoint() -> None:
    """Checkpoints with M = 4, 2, 2 GB (an explicit schedule).
    B: M=4 -> 80, M=2 -> 40 MB/s; D: 60 and 100 s. T = 1000 + 3000/80 + 2*3000/40 = 1187.5
    C = 1650*(1187.5 + 4000/50) + 128*8*D_8(4) + 128*(4*60 + 2*100 + 2*100)."""
    from gateway.cost.predict import experience_schedule, predict_schedule

    app = Application(nodes=2, iterations=100, iteration_s=10, checkpoints=3,
                      checkpoint_gb=3, init_gb=4, init_cache_gb=8)
    assert experience_schedule(app, 8) == [4, 3, 3]
    p = predict_schedule(app, ADAPTIVE, [4, 2, 2])
    assert p.time_s == pytest.approx(1187.5)
    init_b = ADAPTIVE.throughput(4, 8)  # 90 - 30/3 = 80 MB/s
    assert p.init_time_s == pytest.approx(4000 / init_b)
    assert p.total_time_s == pytest.approx(1187.5 + 4000 / init_b)
    expected = (1650 * (1187.5 + 4000 / init_b) + 128 * 8 * ADAPTIVE.attach(4, 8)
                + 128 * (4 * 60 + 2 * 100 + 2 * 100))
    assert p.cost_per_node_agbs == pytest.approx(expected)
    assert p.cost_agbs == pytest.approx(2 * expected)
    same = predict_schedule(app, ADAPTIVE, [2, 2, 2], cache_gb=2)
    assert same == predict(app, ADAPTIVE, 2)  # equal sizes: III-C's formula
    with pytest.raises(ValueError, match="3 checkpoints but 2"):
        predict_schedule(app, ADAPTIVE, [2, 2])
