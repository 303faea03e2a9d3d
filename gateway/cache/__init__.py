"""The bounded write-back cache tier (see docs/cache.md)."""

from gateway.cache.settings import CacheSettings, CacheVolumeSettings, ThrottleSettings
from gateway.cache.throttle import ThrottledBackend
from gateway.cache.tier import CacheTier
from gateway.cache.units import parse_rate, parse_size

__all__ = ["CacheSettings", "CacheTier", "CacheVolumeSettings", "ThrottleSettings",
           "ThrottledBackend", "parse_rate", "parse_size"]
