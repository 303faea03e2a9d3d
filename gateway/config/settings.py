"""The settings of ``squall serve``: one typed model, one section per component.

Each section (:class:`ServerSection`, :class:`CacheSection`, ...) is a model of its own
component's fields; :class:`Settings` joins them. A field is read under one name
everywhere: the config file key ``cache_size`` (or ``size`` in its section's table,
``[cache]``), the environment variable ``SQUALL_CACHE_SIZE`` and the flag
``--cache-size``, with its Field description as help text. :func:`load_settings` reads
the sources (:mod:`gateway.config.sources`); :mod:`gateway.config.flags` makes the flags.

Adding a setting is one field in its section (a type, a default, a description); the
flag, the variable, the keys and the help follow from it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from backends.core.unit_types import ByteSize, Duration, Rate, RateOrOff
from backends.registry import BackendOptions
from gateway.auth.users import USERS_FILE, check_secret
from gateway.cache.settings import CacheSettings, CacheVolumeSettings, ElasticSettings
from gateway.client.sigv4 import DEFAULT_REGION
from gateway.cluster.coordinator.settings import (
    DEFAULT_LEASE_TTL_S,
    DEFAULT_PREFIX,
    MAX_LEASE_TTL_S,
    MIN_LEASE_TTL_S,
    coordinator_settings,
)
from gateway.cluster.settings import (
    ClusterSettings,
    check_peers,
    cluster_settings,
    split_peers,
)
from gateway.config.cores import usable_cores
from gateway.config.sources import ENV_AND_FILE_ONLY, Section, read_settings
from gateway.lifecycle.rules import DAY
from gateway.qos.model import QosSettings
from gateway.qos.shares import ShareLimits

DEFAULT_PORT = 9000
MAX_WORKERS = 256
#: ``--workers auto`` (the default), until the settings resolve it to a count.
AUTO_WORKERS = 0
#: ``auto`` runs one worker per core from this many cores on: on two cores one process
#: served small GETs faster than two workers (docs/workers.md, measured side by side).
AUTO_WORKERS_MIN_CORES = 3
#: ... and at most this many (each divides the cache budget; more with --workers N).
AUTO_WORKERS_MAX = 8


def default_of(component: Any, name: str) -> Any:
    """The default of the field ``name`` of a component's own settings (a pydantic model
    or a dataclass): a section repeats none, so each default has one source."""
    if isinstance(component, type) and issubclass(component, BaseModel):
        return component.model_fields[name].get_default(call_default_factory=True)
    return {f.name: f.default for f in dataclasses.fields(component)}[name]


def _worker_count(value: object) -> int:
    """``auto`` or a whole number of processes from 1 to MAX_WORKERS (number or text)."""
    count = 0
    if isinstance(value, str) and value.strip().lower() == "auto":
        return AUTO_WORKERS
    if isinstance(value, str) and value.strip().isdigit():
        count = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        count = value
    if not 1 <= count <= MAX_WORKERS:
        raise PydanticCustomError(
            "workers", "must be auto or a whole number of processes from 1 to {max}, "
                       "not {got}", {"max": MAX_WORKERS, "got": repr(value)})
    return count


def auto_worker_count(cores: int) -> int:
    """The worker count ``--workers auto`` runs on ``cores`` usable cores."""
    return min(cores, AUTO_WORKERS_MAX) if cores >= AUTO_WORKERS_MIN_CORES else 1


WorkerCount = Annotated[int, BeforeValidator(_worker_count)]


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


class ServerSection(Section):
    table = "server"

    listen: str = Field(f"127.0.0.1:{DEFAULT_PORT}", description="HOST:PORT to listen on")
    data_dir: Path = Field(Path("squall-data"), description="data directory")
    domain: str | None = Field(None, description="serve virtual-hosted-style requests for "
                                                 "<bucket>.DOMAIN (default: path style only)")
    region: str = Field(DEFAULT_REGION, description="region reported to clients")
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="log level")
    access_log: bool = Field(True, description="log one line per request")
    workers: WorkerCount = Field(
        "auto", validate_default=True,
        description="worker processes serving the port, each owning a share of the keys; "
                    "auto: one per core on 3 or more cores (at most 8), one process on "
                    "fewer, with --peers (give every member the same N) or where workers "
                    "cannot run (see docs/workers.md)")
    worker_handover: bool = Field(
        True, description="with --workers N: move a connection whose request is for "
                          "another worker's key to that worker instead of proxying the "
                          "request (plain HTTP only; see docs/workers.md)")

    @field_validator("listen")
    @classmethod
    def _check_listen(cls, value: str) -> str:
        ListenAddress.parse(value)
        return value


class StorageSection(Section):
    table = "storage"
    title = "backend"

    backend: str | None = Field(None, description="KIND:ARGS, e.g. posix:/srv/objects "
                                                  "(default posix:<data-dir>/objects)")
    durability: Literal["fsync", "none"] = Field(
        default_of(BackendOptions, "durability"), description="fsync: acknowledge writes once on stable storage; none: skip "
                             "fsync (faster, loses recent writes on power loss)")
    min_part_size: ByteSize = Field(default_of(BackendOptions, "min_part_size"), ge=0,
                                    description="minimum multipart part size")
    direct_io: bool = Field(
        default_of(BackendOptions, "direct_io"), description="write the bulk of objects and parts (posix backend, cache "
                          "files) past the page cache (O_DIRECT) where the file system "
                          "allows it")
    backend_bandwidth: Rate | None = Field(
        None, description="cap on bytes to/from the backend, e.g. 20MiB/s (default: none)")
    backend_bandwidth_estimate: Rate | None = Field(
        None, description="B_b: the backend's bandwidth as the writeback phases, the elastic "
                          "controller and the cost meter see it, e.g. 400MB/s; not a cap "
                          "(default: --backend-bandwidth, else the measured flush rate)")
    backend_iops: float | None = Field(
        None, ge=0, description="cap on backend operations per second (default: none)")
    backend_probe_interval: Duration = Field(
        5.0, gt=0, description="time between reachability probes of an s3: backend")

    @field_validator("backend")
    @classmethod
    def _check_backend(cls, value: str | None) -> str | None:
        if value is not None:
            BackendSpec.parse(value)
        return value


class CacheSection(Section):
    table = "cache"
    title = "cache tier (see docs/cache.md)"

    cache_size: ByteSize = Field(1 << 30, description="cache capacity; 0 disables it")
    cache_dir: Path | None = Field(None, description="cache volume directory "
                                                    "(default <data-dir>/cache)")
    cache_volumes: Annotated[list[CacheVolumeSettings] | None, ENV_AND_FILE_ONLY] = Field(
        None, description="several volumes ([[cache_volumes]] path = ..., capacity_bytes = "
                          "...); they replace cache_dir and cache_size")
    cache_mode: Literal["static", "elastic"] = Field(
        "static", description="static: the cache volumes are always there; elastic: a volume "
                              "is attached only while a write burst lasts, sized from "
                              "experience (the first one --cache-size)")
    cache_volume_root: Path | None = Field(
        None, description="elastic: where volumes are created (default <data-dir>/volumes)")
    cache_volume_bandwidth: Rate | None = Field(
        None, description="elastic: bandwidth cap of a volume (B_c), e.g. 64MB/s "
                          "(default: none)")
    cache_min_size: ByteSize = Field(default_of(ElasticSettings, "min_size_bytes"), gt=0,
                                     description="elastic: smallest volume")
    cache_max_size: ByteSize | None = Field(
        None, gt=0, description="elastic: largest volume (default: no limit)")
    max_dirty_age: Duration = Field(
        default_of(CacheSettings, "max_dirty_age_s"), description="age after which dirty data is flushed whatever the phase")
    utilization_threshold: float = Field(
        default_of(CacheSettings, "utilization_threshold"), gt=0, le=1,
        description="UT: phase 2 starts when ingest stays below UT x backend bandwidth")
    inactivity_delay: Duration = Field(
        default_of(CacheSettings, "inactivity_delay_s"), ge=0, description="ID: how long ingest must stay below UT before phase 2")
    flush_concurrency: int = Field(default_of(CacheSettings, "flush_concurrency"), ge=1,
                                   description="objects flushed at once")
    cache_admission: Literal["auto", "cache"] = Field(
        default_of(CacheSettings, "admission"), description="auto: writes go past the cache when the backend takes them as "
                            "fast (docs/cache.md, \"Admission\"); cache: cache every write "
                            "that fits")


class CostSection(Section):
    table = "cost"
    title = "cost model (AGBs, see docs/cost-model.md)"

    cost_backend_size_gb: float = Field(0.0, ge=0,
                                        description="N: size of the backing storage in GB")
    cost_cache_bandwidth_mb_s: float = Field(
        0.0, ge=0, description="B_c: bandwidth of the cache device in MB/s")


class LifecycleSection(Section):
    table = "lifecycle"
    title = "bucket lifecycle (see docs/s3-api.md)"

    lifecycle_interval: Duration = Field(
        3600.0, gt=0, description="time between two scans enforcing lifecycle rules")
    lifecycle_day_seconds: Duration = Field(
        DAY, gt=0, description="length of a lifecycle day (as S3); a shorter day is a "
                                    "testing aid that makes Days rules act sooner")


class ClusterSection(Section):
    table = "cluster"
    title = "cluster (see docs/cluster.md)"

    peers: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="ordered member list URL0,URL1,... (every member gets the same list); "
                    "each key is owned by one member")
    node_id: int | None = Field(
        None, ge=0, description="this node's index K in --peers (default: the member whose "
                                "host is this host's name)")
    cluster_secret: str | None = Field(
        None, description="shared secret authenticating peer traffic (required with more "
                          "than one member; prefer SQUALL_CLUSTER_SECRET: flags show in ps)")
    peer_ca: Path | None = Field(
        None, description="PEM CA certificate(s) trusted for https:// members in --peers "
                          "(a private CA)")
    dirty_replicas: int | None = Field(
        None, ge=1, description="members keeping each unflushed write: the key's owner and "
                                "the next R-1 on its ring, on other hosts (with "
                                "--coordinator; default 2; 1 turns mirroring off)")
    coordinator: str | None = Field(
        None, description="etcd endpoints etcd://HOST:PORT[,HOST:PORT...] (etcds:// for "
                          "TLS): members register under a lease and the ring follows the "
                          "live registrations (docs/cluster.md)")
    coordinator_prefix: str = Field(
        DEFAULT_PREFIX, description="prefix of every key this cluster keeps in etcd (clusters "
                                "sharing one etcd use different prefixes)")
    lease_ttl: int = Field(
        DEFAULT_LEASE_TTL_S, ge=MIN_LEASE_TTL_S, le=MAX_LEASE_TTL_S, description="seconds a member's lease lives without being "
                                     "renewed: a member that stops renewing stops serving "
                                     "after 2/3 of it, its keys move after all of it")
    advertise_url: str | None = Field(
        None, description="the URL the other members and client-side routing reach this "
                          "member at (default http:// or https:// plus --listen)")
    etcd_ca: Path | None = Field(None, description="PEM CA certificate(s) that sign etcd's")
    etcd_cert: Path | None = Field(None, description="client certificate for etcd (PEM)")
    etcd_key: Path | None = Field(None, description="its private key (PEM)")
    etcd_user: str | None = Field(None, description="etcd user (with --etcd-password)")
    etcd_password: str | None = Field(
        None, description="etcd password (prefer SQUALL_ETCD_PASSWORD: flags show in ps)")

    @field_validator("peers", mode="before")
    @classmethod
    def _split_peers(cls, value: object) -> object:
        return split_peers(value)

    @field_validator("peers")
    @classmethod
    def _check_peers(cls, value: list[str]) -> list[str]:
        return check_peers(value)


class TlsSection(Section):
    table = "tls"
    title = "TLS (see docs/tls.md)"

    tls_cert: Path | None = Field(
        None, description="PEM certificate chain: serve HTTPS (reloaded on SIGHUP)")
    tls_key: Path | None = Field(None, description="PEM private key of --tls-cert")


class LimitsSection(Section):
    table = "limits"
    title = "limits and timeouts (see docs/s3-api.md, \"Limits\"; 0 = off)"

    header_timeout: Duration = Field(
        30.0, ge=0, description="time a client has to send a request line and headers")
    body_idle_timeout: Duration = Field(
        60.0, ge=0, description="time a request body may stall before 400 RequestTimeout")
    keep_alive_timeout: Duration = Field(
        5.0, gt=0, description="time an idle kept-alive connection stays open")
    max_header_bytes: ByteSize = Field(
        64 * 1024, ge=8 * 1024,
        description="request line and headers; more: 400 RequestHeaderSectionTooLarge")
    max_header_count: int = Field(300, ge=32, description="headers of one request")
    max_connections: int = Field(1024, ge=0, description="open client connections per "
                                                         "process; more are closed at once")
    max_connections_per_client: int | None = Field(
        None, ge=0, description="open connections of one client address (IPv6: one /64) "
                                "per process; more may only ask for health or metrics "
                                "(default: a quarter of max_connections; 0: no limit)")
    header_timeout_busy: Duration = Field(
        2.0, ge=0, description="header_timeout while three quarters of max_connections "
                               "are open, also for the connections already waiting")
    max_requests: int = Field(512, ge=0,
                              description="requests in flight per process; more: 503 SlowDown")
    body_min_rate: RateOrOff = Field(
        16 * 1024, description="slowest a request body may arrive (or a response be "
                               "taken) after body_rate_grace; slower: 400 RequestTimeout")
    body_rate_grace: Duration = Field(
        10.0, gt=0, description="time before body_min_rate applies, and the window over "
                                "which it is measured")
    body_deadline: Duration = Field(
        300.0, ge=0, description="time a request body may take, plus its length at "
                                 "body_deadline_rate; longer: 400 RequestTimeout")
    body_deadline_rate: RateOrOff = Field(
        128 * 1024, description="rate at which body_deadline grows with the declared "
                                "length (0: a fixed deadline)")
    user_max_requests: int = Field(
        default_of(ShareLimits, "max_requests"), ge=0, description="requests in flight per user and process that are always "
                              "admitted; beyond: admitted only while the process keeps "
                              "as many free, else 503 SlowDown")
    user_max_rate: float = Field(
        default_of(ShareLimits, "max_rate"), ge=0, description="requests per second per user and process (0: no limit); "
                               "more: 503 SlowDown")
    user_max_bandwidth: RateOrOff = Field(
        default_of(ShareLimits, "max_bandwidth"), description="body bytes per second per user and process, uploads and "
                         "downloads (0: no limit); more: 503 SlowDown")


class AccessSection(Section):
    table = "access"
    title = "access (see docs/security.md)"

    access_key: Annotated[str | None, ENV_AND_FILE_ONLY] = Field(
        None, description="the admin access key (default: generated once, kept in "
                          "<data-dir>/credentials.json)")
    secret_key: Annotated[str | None, ENV_AND_FILE_ONLY] = Field(
        None, description="the admin secret key (default: generated with the access key)")
    sigv2: bool = Field(True, description="accept AWS Signature Version 2 (header and "
                                          "presigned URLs)")
    public_status: bool = Field(
        False, description="serve /_squall/status, /metrics, /cluster and /ui without "
                           "authentication (default: signed requests or the status token)")
    status_token: str | None = Field(
        None, description="read-only token for the status views, sent as 'Authorization: "
                          "Bearer TOKEN' (16 characters or more; prefer SQUALL_STATUS_TOKEN: "
                          "flags show in ps)")
    users_file: Path | None = Field(None, description="the users and their keys "
                                                      "(default <data-dir>/users.json)")
    default_object_ownership: Literal["BucketOwnerEnforced", "BucketOwnerPreferred",
                                      "ObjectWriter"] = Field(
        "BucketOwnerEnforced",
        description="Object Ownership of a bucket created without x-amz-object-ownership: "
                    "BucketOwnerEnforced disables ACLs, as S3 since April 2023; "
                    "ObjectWriter or BucketOwnerPreferred for software that sets ACLs")
    default_public_access_block: Literal["auto", "all", "none"] = Field(
        "auto",
        description="public access block of a new bucket: all four settings on, none, or "
                    "auto: all with BucketOwnerEnforced, none with ACLs enabled (as S3 "
                    "buckets made before 2023)")

    @field_validator("secret_key", "status_token")
    @classmethod
    def _check_secret(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            check_secret(value, "the " + (info.field_name or "").replace("_", " "))
        return value


class QosSection(Section):
    table = "qos"
    title = "performance gears (see docs/qos.md)"

    qos: Annotated[QosSettings, ENV_AND_FILE_ONLY] = Field(
        default_factory=QosSettings,
        description="the [qos] table, with a [qos.buckets.NAME] table per class")


#: The sections in the order of ``squall serve --help``.
SECTIONS: tuple[type[Section], ...] = (
    ServerSection, StorageSection, CacheSection, CostSection, LifecycleSection,
    ClusterSection, TlsSection, LimitsSection, AccessSection, QosSection)


class Settings(BaseSettings, ServerSection, StorageSection, CacheSection, CostSection,
               LifecycleSection, ClusterSection, TlsSection, LimitsSection, AccessSection,
               QosSection):
    """Everything ``squall serve`` needs: the fields of every section, each also
    ``SQUALL_<NAME>`` and ``--<name>`` (see :func:`gateway.config.sources.load_settings`)."""

    model_config = SettingsConfigDict(env_prefix="SQUALL_", extra="forbid")

    #: ``workers`` was ``auto`` (the start may then keep a data directory's count).
    _workers_auto: bool = PrivateAttr(False)

    @model_validator(mode="after")
    def _resolve_auto_workers(self) -> Settings:
        if self.workers == AUTO_WORKERS:
            self._workers_auto = True
            # Members of a cluster must agree on the count: it is chosen, not guessed.
            self.workers = 1 if self.workers_refusal() or self.peers or self.coordinator \
                else auto_worker_count(usable_cores())
        return self

    @property
    def workers_auto(self) -> bool:
        """The worker count was chosen by ``--workers auto``."""
        return self._workers_auto

    def workers_refusal(self) -> str | None:
        """Why this gateway cannot run as several worker processes (None: it can)."""
        if self.node_id is not None and not self.peers:
            return "--node-id needs --peers (the ordered member list)"
        if self.backend_spec.kind == "blobseer_like":
            return ("the blobseer_like backend is used by one process at a time; "
                    "run it with --workers 1")
        return None

    @property
    def listen_address(self) -> ListenAddress:
        return ListenAddress.parse(self.listen)

    def advertised_url(self) -> str | None:
        """Where the other members reach this one: ``--advertise-url``, else ``http://``
        (``https://`` with TLS) plus the listen address; None for a wildcard address."""
        if self.advertise_url:
            return self.advertise_url
        listen = self.listen_address
        if listen.host in ("", "0.0.0.0", "::"):
            return None
        scheme = "https" if self.tls_cert is not None else "http"
        host = f"[{listen.host}]" if ":" in listen.host else listen.host
        return f"{scheme}://{host}:{listen.port}"

    def clustering(self, host_worker: tuple[int, int] = (0, 1)) -> ClusterSettings | None:
        """The cluster this gateway is a member of (None: none); ValueError with a
        message a user can act on. ``host_worker``: (this worker, workers per host)."""
        coordinator = None
        if self.coordinator:
            coordinator = coordinator_settings(
                self.coordinator, prefix=self.coordinator_prefix, lease_ttl_s=self.lease_ttl,
                ca=self.etcd_ca, cert=self.etcd_cert, key=self.etcd_key, user=self.etcd_user,
                password=self.etcd_password)
        return cluster_settings(self.peers, self.node_id, self.cluster_secret,
                                peer_ca=self.peer_ca, dirty_replicas=self.dirty_replicas,
                                mirror_dir=self.data_dir / "mirror",
                                state_file=self.data_dir / "cluster" / "lease.json",
                                coordinator=coordinator, advertise_url=self.advertised_url(),
                                host_worker=host_worker)

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
        # Settings(...) validates what it is given; load_settings reads the sources.
        return (init_settings,)


def load_settings(config_file: Path | None = None, **flags: object) -> Settings:
    """Settings from the defaults, an optional TOML file, the ``SQUALL_*`` environment and
    ``flags`` (field names; ``None`` = not given), each beating the one before.

    Raises :class:`~gateway.config.sources.SettingsError` naming the flag, variable or
    file key of a bad value and what it expects.
    """
    return read_settings(Settings, SECTIONS, config_file, flags)
