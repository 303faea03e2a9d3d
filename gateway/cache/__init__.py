"""The bounded write-back cache tier (see docs/cache.md)."""

from gateway.cache.settings import CacheSettings, CacheVolumeSettings
from gateway.cache.tier import CacheTier

__all__ = ["CacheSettings", "CacheTier", "CacheVolumeSettings"]
