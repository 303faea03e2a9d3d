"""Typed settings: defaults < config file (TOML) < ``SQUALL_*`` environment < CLI flags."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from backends.units import parse_rate, parse_size
from gateway.cache.settings import CacheVolumeSettings
from gateway.cluster.settings import check_peers, split_peers
from gateway.qos.model import QosSettings
from gateway.users import USERS_FILE, check_secret

DEFAULT_PORT = 9000
MAX_WORKERS = 256


class ListenAddress(BaseModel):
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> ListenAddress:
        host, sep, port = text.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError(f"listen address must be HOST:PORT (e.g. 127.0.0.1:9000), "
                             f"not {text!r}")
        return cls(host=host.strip("[]"), port=int(port))


class BackendSpec(BaseModel):
    """``KIND:ARGS``, e.g. ``posix:/srv/data``."""

    kind: str
    args: str

    @classmethod
    def parse(cls, text: str) -> BackendSpec:
        kind, sep, args = text.partition(":")
        if not sep or not kind or not args:
            raise ValueError(f"backend must be KIND:ARGS (e.g. posix:/srv/squall), not {text!r}")
        return cls(kind=kind, args=args)


class Settings(BaseSettings):
    """Everything ``squall serve`` needs; every field is also ``SQUALL_<NAME>``."""

    model_config = SettingsConfigDict(env_prefix="SQUALL_", extra="forbid")

    listen: str = f"127.0.0.1:{DEFAULT_PORT}"
    data_dir: Path = Path("squall-data")
    backend: str | None = None  # default: posix:<data_dir>/objects
    domain: str | None = None  # virtual-hosted-style: <bucket>.<domain>
    region: str = "us-east-1"
    access_key: str | None = None
    secret_key: str | None = None
    sigv2: bool = True  # accept Signature Version 2 (header and presigned URLs)
    durability: Literal["fsync", "none"] = "fsync"
    min_part_size: int = Field(default=5 * 1024 * 1024, ge=0)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    access_log: bool = True
    cache_size: str = "1GiB"  # 0 disables the cache tier
    cache_dir: Path | None = None  # default: <data_dir>/cache
    # Several volumes (config file: [[cache_volumes]] path = "...", capacity_bytes = "1GiB");
    # when set, they replace cache_dir/cache_size.
    cache_volumes: list[CacheVolumeSettings] | None = None
    # "elastic": no cache volume while there is no burst; one is attached (sized from
    # experience, the first one cache_size) under cache_volume_root while a burst lasts.
    cache_mode: Literal["static", "elastic"] = "static"
    cache_volume_root: Path | None = None  # default: <data_dir>/volumes
    cache_volume_bandwidth: str | None = None  # B_c cap of elastic volumes, e.g. 64MB/s
    cache_min_size: str = "1MiB"  # bounds of elastic volume sizes
    cache_max_size: str | None = None
    backend_bandwidth: str | None = None  # e.g. 20MiB/s
    backend_iops: float | None = None
    max_dirty_age: float = 300.0
    utilization_threshold: float = Field(default=0.3, gt=0, le=1)
    inactivity_delay: float = Field(default=30.0, ge=0)
    flush_concurrency: int = Field(default=4, ge=1)
    # "auto": a write goes past the cache when the backend takes it as fast (measured);
    # "cache": every write that fits is cached (docs/cache.md, "Admission").
    cache_admission: Literal["auto", "cache"] = "auto"
    # Cost model (seed III-B): N, the backing device size in GB, and B_c, the cache
    # device's bandwidth in MB/s (B_b is --backend-bandwidth).
    cost_backend_size_gb: float = Field(default=0.0, ge=0)
    cost_cache_bandwidth_mb_s: float = Field(default=0.0, ge=0)
    # Cluster (docs/cluster.md): the ordered member URLs (``SQUALL_PEERS`` and --peers take
    # them comma-separated), this node's index among them (default: found by host name),
    # and the secret that authenticates peer traffic.
    peers: list[str] = Field(default_factory=list)
    node_id: int | None = Field(default=None, ge=0)
    cluster_secret: str | None = None
    # A private CA (PEM) trusted for https:// members in peers, besides the system's.
    peer_ca: Path | None = None
    # Members holding each unflushed write: its owner and the next R-1 on its ring
    # (docs/cluster.md, "Mirrored write-back"); default 2 with >= 2 members, else 1.
    dirty_replicas: int | None = Field(default=None, ge=1)
    # HTTPS on the listening port (docs/tls.md): PEM certificate chain and private key,
    # loaded again on SIGHUP.
    tls_cert: Path | None = None
    tls_key: Path | None = None
    # Bucket lifecycle (docs/s3-api.md, "Lifecycle"): seconds between two scans, and the
    # length of a lifecycle "day" in seconds (86400 as S3; shorter only to test rules).
    lifecycle_interval: float = Field(default=3600.0, gt=0)
    lifecycle_day_seconds: float = Field(default=86_400.0, gt=0)
    # Worker processes serving the one listening port (docs/workers.md); 1: one process,
    # as without the option.
    workers: int = Field(default=1, ge=1, le=MAX_WORKERS)
    # Connection limits and timeouts (docs/s3-api.md, "Limits"); 0 turns a timeout or a
    # connection/request limit off.
    header_timeout: float = Field(default=30.0, ge=0)  # seconds to send request line+headers
    body_idle_timeout: float = Field(default=60.0, ge=0)  # seconds a body may stall
    keep_alive_timeout: float = Field(default=5.0, gt=0)  # idle seconds between requests
    max_header_bytes: int = Field(default=64 * 1024, ge=8 * 1024)  # request line + headers
    max_header_count: int = Field(default=300, ge=32)
    max_connections: int = Field(default=1024, ge=0)  # per process
    max_requests: int = Field(default=512, ge=0)  # in flight per process; more: SlowDown
    # Seconds between two reachability probes of a networked backend (s3:).
    backend_probe_interval: float = Field(default=5.0, gt=0)
    # Access (docs/security.md): status, metrics, cluster view and dashboard readable
    # without a signature; else a signed request or "Authorization: Bearer <status_token>".
    public_status: bool = False
    status_token: str | None = None
    users_file: Path | None = None  # default: <data_dir>/users.json
    # Performance gears per bucket (docs/qos.md): the config file's [qos] table, with
    # a [qos.buckets.NAME] table per class.
    qos: QosSettings = Field(default_factory=QosSettings)

    @field_validator("secret_key", "status_token")
    @classmethod
    def _check_secret(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            check_secret(value, "the " + (info.field_name or "").replace("_", " "))
        return value

    @field_validator("listen")
    @classmethod
    def _check_listen(cls, value: str) -> str:
        ListenAddress.parse(value)
        return value

    @field_validator("cache_volume_bandwidth")
    @classmethod
    def _check_rate(cls, value: str | None) -> str | None:
        if value is not None and parse_rate(value) <= 0:
            raise ValueError("must be a rate > 0, e.g. 64MB/s")
        return value

    @field_validator("cache_min_size", "cache_max_size")
    @classmethod
    def _check_size(cls, value: str | None) -> str | None:
        if value is not None and parse_size(value) <= 0:
            raise ValueError("must be a size > 0, e.g. 1GiB")
        return value

    @field_validator("backend")
    @classmethod
    def _check_backend(cls, value: str | None) -> str | None:
        if value is not None:
            BackendSpec.parse(value)
        return value

    @field_validator("peers", mode="before")
    @classmethod
    def _split_peers(cls, value: object) -> object:
        return split_peers(value)

    @field_validator("peers")
    @classmethod
    def _check_peers(cls, value: list[str]) -> list[str]:
        return check_peers(value)

    @property
    def listen_address(self) -> ListenAddress:
        return ListenAddress.parse(self.listen)

    @property
    def users_path(self) -> Path:
        return self.users_file or self.data_dir / USERS_FILE

    @property
    def backend_spec(self) -> BackendSpec:
        if self.backend:
            return BackendSpec.parse(self.backend)
        return BackendSpec(kind="posix", args=str(self.data_dir / "objects"))

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # load_settings merges file, environment and flags itself, in that order.
        return (init_settings,)


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build settings from an optional TOML file, the environment and explicit overrides.

    The file's keys are the field names (``listen = "127.0.0.1:9000"``); ``SQUALL_*``
    environment variables beat the file; ``overrides`` (CLI flags, ``None`` = unset) beat
    both. Raises ValueError or pydantic.ValidationError with a readable message.
    """
    file_values: dict[str, Any] = {}
    if config_file is not None:
        try:
            file_values = tomllib.loads(config_file.read_text())
        except OSError as exc:
            raise ValueError(f"cannot read config file {config_file}: {exc.strerror}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"config file {config_file} is not valid TOML: {exc}") from exc
        unknown = set(file_values) - set(Settings.model_fields)
        if unknown:
            raise ValueError(f"unknown key(s) in config file {config_file}: "
                             f"{', '.join(sorted(unknown))}")
    from_env = {name: os.environ[f"SQUALL_{name.upper()}"] for name in Settings.model_fields
                if f"SQUALL_{name.upper()}" in os.environ}
    explicit = {k: v for k, v in overrides.items() if v is not None}
    return Settings(**{**file_values, **from_env, **explicit})
