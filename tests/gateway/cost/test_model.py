"""The III-B cost model against hand-computed values."""

from __future__ import annotations

import pytest

from gateway.cost import model

# samples (time s, cache size GB): off, then 10 GB for 5 s
SAMPLES = [(0.0, 0.0), (5.0, 10.0), (10.0, 10.0)]


def test_single_disk_is_b_times_n_times_t() -> None:
    # static-slow of the seed's IV-C: 33 MB/s, 50 GB, for 10 s
    assert model.single_disk_accumulation(bandwidth_mb_s=33, size_gb=50, seconds=10) == 16500


def test_trapezoid_and_step_integrals() -> None:
    # trapezoid: 5*(0+10)/2 + 5*(10+10)/2 = 25 + 50; step holds the left sample: 0 + 50
    assert model.integrate_size(SAMPLES) == 75.0
    assert model.integrate_size(SAMPLES, "step") == 50.0
    assert model.integrate_size([]) == 0.0
    assert model.integrate_size([(3.0, 7.0)]) == 0.0


def test_adjusted_storage_accumulation() -> None:
    # 33*50*10 + 128*75 = 16500 + 9600
    assert model.adjusted_storage_accumulation(
        backend_bandwidth_mb_s=33, backend_size_gb=50, seconds=10,
        cache_bandwidth_mb_s=128, cache_gb_seconds=75) == 26100
    assert model.accumulation_from_samples(
        SAMPLES, backend_bandwidth_mb_s=33, backend_size_gb=50,
        cache_bandwidth_mb_s=128) == 26100
    assert model.accumulation_from_samples(
        SAMPLES, backend_bandwidth_mb_s=33, backend_size_gb=50, cache_bandwidth_mb_s=128,
        method="step") == 16500 + 128 * 50
    assert model.accumulation_from_samples([], backend_bandwidth_mb_s=1, backend_size_gb=1,
                                           cache_bandwidth_mb_s=1) == 0.0


def test_total_is_the_sum_over_instances() -> None:
    assert model.total_accumulation([26100.0] * 32) == 835200.0


def test_units_are_decimal() -> None:
    assert model.gb(10_000_000_000) == 10.0
    assert model.mb_per_s(128_000_000) == 128.0


@pytest.mark.parametrize("samples", [[(5.0, 1.0), (4.0, 1.0)], [(0.0, -1.0), (1.0, 1.0)],
                                     [(0.0, float("nan")), (1.0, 1.0)]])
def test_bad_samples_are_refused(samples: list[tuple[float, float]]) -> None:
    with pytest.raises(ValueError):
        model.integrate_size(samples)


def test_negative_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="bandwidth"):
        model.single_disk_accumulation(bandwidth_mb_s=-1, size_gb=1, seconds=1)
    with pytest.raises(ValueError, match="time"):
        model.single_disk_accumulation(bandwidth_mb_s=1, size_gb=1, seconds=float("inf"))
