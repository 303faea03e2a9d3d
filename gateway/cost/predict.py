"""Performance and cost prediction and cache-size advice.

Seed: adaptive caching, section III-C (prediction) and III-D (optimal cache size), for a
bulk-synchronous application on n nodes that runs I iterations of I_t seconds and writes K
checkpoints of S_c GB per node, after an initial dump of S_i GB per node::

    T   = I*I_t + K*S_c / B(S_c) + P
    C   = B_b*N*(T + S_i/B(S_i)) + B_c*M(S_i)*D(S_i) + K*B_c*M(S_c)*D(S_c)
    C_a = n*C                                                       [AGBs]

B(x) (MB/s), D(x) (s) and P(x) (s) come from calibration at the chosen cache size M
(:mod:`gateway.cost.calibration`); sizes are GB and S/B is converted to seconds
(1 GB = 1000 MB). P, not in the seed, is the compute time lost while the cache drains a
burst beside the application: P(S_i) for the compute phase after the initial dump and
P(S_c) for each after a checkpoint but the last (0 when the calibration did not measure
it; on shared cores a draining cache slows the compute next to it). One deliberate
reading: the seed prints the initial-dump term as S_i/D(S_i), which is GB/s and cannot be
added to T; the text says the term accounts for the duration of the initialisation
phase, which is S_i/B(S_i). We use that.

:func:`advise` applies III-D: evaluate T and C_a for every candidate M(S_c), keep those
with T <= T_max, recommend the one with minimal C_a. It also ranks whole configurations
(backend, providers, cache) by performance/cost, the last step of the I/O configuration
methodology seed: performance is 1/T, so the ratio is 1/(T*C_a), higher is better.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from gateway.cost.calibration import CalibrationError, Configuration
from gateway.cost.model import MB_PER_GB


@dataclass(frozen=True, slots=True, kw_only=True)
class Application:
    """The application's I/O model (III-C)."""

    nodes: int = 1  # n
    iterations: int  # I
    iteration_s: float  # I_t
    checkpoints: int  # K
    checkpoint_gb: float  # S_c, per node
    init_gb: float = 0.0  # S_i, per node (0: no initial dump)
    init_cache_gb: float | None = None  # M(S_i); None: the same M as for checkpoints

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError("nodes must be >= 1")
        if self.iterations < 0 or self.checkpoints < 0:
            raise ValueError("iterations and checkpoints must be >= 0")
        for name, value in (("iteration time", self.iteration_s),
                            ("initial dump size", self.init_gb)):
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0")
        if not (math.isfinite(self.checkpoint_gb) and self.checkpoint_gb > 0):
            raise ValueError("checkpoint size must be a finite number > 0")
        if self.init_cache_gb is not None and not (
                math.isfinite(self.init_cache_gb) and self.init_cache_gb >= 0):
            raise ValueError("initial cache size must be a finite number >= 0")


@dataclass(frozen=True, slots=True)
class Prediction:
    configuration: str
    cache_gb: float  # M(S_c)
    throughput_mb_s: float  # B(S_c)
    attach_s: float  # D(S_c)
    time_s: float  # T
    cost_per_node_agbs: float  # C
    cost_agbs: float  # C_a
    meets_deadline: bool = True
    init_time_s: float = 0.0  # S_i/B(S_i): the initial dump, before T
    compute_slowdown_s: float = 0.0  # P: compute time lost to draining caches, in T

    @property
    def total_time_s(self) -> float:
        """T plus the initial dump: the whole run, as a stopwatch measures it."""
        return self.time_s + self.init_time_s

    @property
    def perf_cost_ratio(self) -> float:
        """(1/T) / C_a: higher is better."""
        return 1.0 / (self.time_s * self.cost_agbs) if self.time_s and self.cost_agbs \
            else math.inf


@dataclass(frozen=True, slots=True)
class Advice:
    candidates: list[Prediction]  # every configuration x cache size that could be evaluated
    recommended: Prediction | None  # minimal C_a with T <= T_max over all configurations
    best_per_configuration: dict[str, Prediction | None]  # the same, per configuration
    ranking: list[Prediction]  # each configuration's best, by perf/cost ratio (best first)
    skipped: list[str] = field(default_factory=list)  # why some candidates are missing


def write_time_s(size_gb: float, throughput_mb_s: float) -> float:
    """Seconds to write ``size_gb`` GB at ``throughput_mb_s`` MB/s."""
    if throughput_mb_s <= 0:
        raise ValueError("throughput must be > 0")
    return size_gb * MB_PER_GB / throughput_mb_s


def completion_time(*, iterations: int, iteration_s: float, checkpoints: int,
                    checkpoint_gb: float, throughput_mb_s: float) -> float:
    """T = I*I_t + K*S_c/B(S_c) in seconds (III-C)."""
    return iterations * iteration_s + checkpoints * write_time_s(checkpoint_gb,
                                                                 throughput_mb_s)


def node_cost(*, backend_bandwidth_mb_s: float, backend_size_gb: float,
              cache_bandwidth_mb_s: float, time_s: float, checkpoints: int,
              cache_gb: float, attach_s: float, init_write_s: float = 0.0,
              init_cache_gb: float = 0.0, init_attach_s: float = 0.0) -> float:
    """C = B_b*N*(T + S_i/B(S_i)) + B_c*M(S_i)*D(S_i) + K*B_c*M(S_c)*D(S_c) (III-C)."""
    return (backend_bandwidth_mb_s * backend_size_gb * (time_s + init_write_s)
            + cache_bandwidth_mb_s * init_cache_gb * init_attach_s
            + checkpoints * cache_bandwidth_mb_s * cache_gb * attach_s)


def predict(app: Application, config: Configuration, cache_gb: float,
            deadline_s: float | None = None) -> Prediction:
    """T and C_a for ``app`` on ``config`` with M(S_c) = ``cache_gb``.

    Raises :class:`CalibrationError` when the calibration does not cover the question.
    """
    return predict_schedule(app, config, [cache_gb] * app.checkpoints, deadline_s,
                            cache_gb=cache_gb)


def experience_schedule(app: Application, initial_cache_gb: float) -> list[float]:
    """M per checkpoint as the elastic controller sizes it for a steady application:
    each volume is sized to what the previous burst used, i.e. its data (III-A.3), so
    the first checkpoint gets S_i (or the initial size without an initial dump) and the
    others S_c."""
    first = app.init_gb if app.init_gb > 0 else initial_cache_gb
    return [first, *[app.checkpoint_gb] * (app.checkpoints - 1)][:app.checkpoints]


def predict_schedule(app: Application, config: Configuration,
                     checkpoint_cache_gb: Sequence[float], deadline_s: float | None = None,
                     *, cache_gb: float | None = None) -> Prediction:
    """T and C_a when checkpoint k runs with a cache of ``checkpoint_cache_gb[k]`` GB::

        T = I*I_t + sum_k S_c/B_{M_k}(S_c) + P_{M(S_i)}(S_i) + sum_{k<K} P_{M_k}(S_c)
        C = B_b*N*(T + S_i/B(S_i)) + B_c*M(S_i)*D(S_i) + sum_k B_c*M_k*D_{M_k}(S_c)

    With every M_k equal this is III-C's formula. The reported B and D are averages over
    the checkpoints, ``cache_gb`` the last M_k (or the one given).
    """
    if len(checkpoint_cache_gb) != app.checkpoints:
        raise ValueError(f"{app.checkpoints} checkpoints but {len(checkpoint_cache_gb)} "
                         "cache sizes")
    sizes = list(checkpoint_cache_gb)
    b = [config.throughput(app.checkpoint_gb, m) for m in sizes]
    d = [config.attach(app.checkpoint_gb, m) for m in sizes]
    # the bursts (GB, M) a compute phase follows: each checkpoint but the last, the dump
    drained = [(app.checkpoint_gb, m) for m in sizes[:-1]]
    init_write_s = init_attach_s = init_m = 0.0
    if app.init_gb > 0:
        init_m = app.init_cache_gb if app.init_cache_gb is not None else (
            cache_gb if cache_gb is not None else (sizes[0] if sizes else 0.0))
        init_write_s = write_time_s(app.init_gb, config.throughput(app.init_gb, init_m))
        init_attach_s = config.attach(app.init_gb, init_m)
        drained.append((app.init_gb, init_m))
    slowdown = sum(config.slowdown(x, m) for x, m in drained) if app.iterations else 0.0
    t = (app.iterations * app.iteration_s + slowdown
         + sum(write_time_s(app.checkpoint_gb, x) for x in b))
    c = node_cost(backend_bandwidth_mb_s=config.backend_bandwidth_mb_s,
                  backend_size_gb=config.backend_size_gb,
                  cache_bandwidth_mb_s=config.cache_bandwidth_mb_s, time_s=t,
                  checkpoints=1, cache_gb=1.0, attach_s=sum(m * x for m, x in zip(
                      sizes, d, strict=True)),
                  init_write_s=init_write_s, init_cache_gb=init_m,
                  init_attach_s=init_attach_s)
    k = max(1, len(sizes))
    return Prediction(configuration=config.name,
                      cache_gb=cache_gb if cache_gb is not None else (sizes[-1] if sizes
                                                                      else 0.0),
                      throughput_mb_s=sum(b) / k if b else config.throughput(
                          app.checkpoint_gb, cache_gb or 0.0),
                      attach_s=sum(d) / k if d else 0.0, time_s=t, cost_per_node_agbs=c,
                      cost_agbs=app.nodes * c,
                      meets_deadline=deadline_s is None or t <= deadline_s,
                      init_time_s=init_write_s, compute_slowdown_s=slowdown)


def _cheapest(predictions: Sequence[Prediction]) -> Prediction | None:
    feasible = [p for p in predictions if p.meets_deadline]
    return min(feasible, key=lambda p: (p.cost_agbs, p.time_s, p.cache_gb), default=None)


def advise(app: Application, configs: Sequence[Configuration], *,
           deadline_s: float | None = None,
           cache_sizes: Sequence[float] | None = None) -> Advice:
    """Evaluate candidate cache sizes (III-D) and rank configurations.

    Candidates are ``cache_sizes`` if given, else each configuration's calibrated sizes.
    A candidate the calibration cannot answer is skipped with a note in ``skipped``.
    """
    if deadline_s is not None and not (math.isfinite(deadline_s) and deadline_s > 0):
        raise ValueError("the deadline must be a finite number of seconds > 0")
    candidates: list[Prediction] = []
    skipped: list[str] = []
    best: dict[str, Prediction | None] = {}
    for config in configs:
        mine: list[Prediction] = []
        for m in (cache_sizes if cache_sizes is not None else config.cache_sizes()):
            try:
                mine.append(predict(app, config, m, deadline_s))
            except CalibrationError as exc:
                skipped.append(str(exc))
        candidates.extend(mine)
        best[config.name] = _cheapest(mine)
    ranking = sorted((p for p in best.values() if p is not None),
                     key=lambda p: (-p.perf_cost_ratio, p.cost_agbs, p.configuration))
    return Advice(candidates=candidates, recommended=_cheapest(candidates),
                  best_per_configuration=best, ranking=ranking, skipped=skipped)
