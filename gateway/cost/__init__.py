"""Cost accounting and prediction (seed: adaptive block caching, sections III-B..D).

- :mod:`gateway.cost.model`: the adjusted storage accumulation C(t) in AGBs (pure).
- :mod:`gateway.cost.meter`: samples the cache tier and accumulates C(t) while serving.
- :mod:`gateway.cost.calibration`: calibration tables B_M(x), D_M(x) and their file format.
- :mod:`gateway.cost.predict`: completion time T, cost C_a, cache-size advice.
- :mod:`gateway.commands.cost`: ``squall cost``, ``squall predict``, ``squall advise``.
"""
