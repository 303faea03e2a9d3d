"""``blobseer_like:DIR1,DIR2,...[?option=value&...]`` -> :class:`BlobseerConfig`."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from backends.core.units import parse_rate, parse_size

KiB = 1 << 10
MiB = 1 << 20
MIN_CHUNK = 4 * KiB
MAX_CHUNK = 64 * MiB
DEFAULT_CHUNK = 1 * MiB

# option name -> short description, used in error messages and docs.
OPTIONS = {
    "chunk": "chunk size, e.g. 1MiB (4KiB..64MiB; default 1MiB)",
    "cap": "bandwidth cap of each provider, e.g. 50MiB/s (reads and writes together)",
    "standby": "comma-separated provider directories held in reserve for write bursts",
    "burst": "ingest rate above which a standby provider is activated, e.g. 200MiB/s",
    "burst_window": "seconds ingest must stay above burst= before activation (default 2)",
    "fanout": "chunk transfers in flight per request (default: active providers, max 8)",
    "replicas": "providers holding each metadata record (default 2)",
    "gc_interval": "seconds between garbage collections (default 30; 0: on demand only)",
}


@dataclass(frozen=True, slots=True)
class BlobseerConfig:
    """Everything a blobseer_like store needs, validated once."""

    providers: tuple[Path, ...]
    standby: tuple[Path, ...] = ()
    chunk_size: int = DEFAULT_CHUNK
    cap: float | None = None  # bytes per second per provider
    burst: float | None = None  # bytes per second of ingest that activates a standby
    burst_window: float = 2.0
    fanout: int | None = None
    replicas: int = 2
    gc_interval: float = 30.0  # 0: garbage is collected on demand only


def _dirs(text: str, what: str) -> tuple[Path, ...]:
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise ValueError(f"blobseer_like {what} must be comma-separated directories, "
                         f"not {text!r}")
    paths = tuple(Path(p).expanduser().absolute() for p in parts)
    if len(set(paths)) != len(paths):
        raise ValueError(f"blobseer_like {what} names a directory twice: {text!r}")
    return paths


def _number(name: str, value: str, *, minimum: float, integer: bool) -> float:
    try:
        number = int(value) if integer else float(value)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise ValueError(f"blobseer_like option {name}={value!r} is not {kind}") from None
    if not number >= minimum:
        raise ValueError(f"blobseer_like option {name}={value} must be >= {minimum:g}")
    return number


def parse_config(args: str) -> BlobseerConfig:
    """The config in ``DIRS[?options]``; ValueError with the reason if invalid."""
    dirs, _, query = args.partition("?")
    providers = _dirs(dirs, "providers")
    options: dict[str, str] = {}
    for name, value in urllib.parse.parse_qsl(query, keep_blank_values=True):
        if name not in OPTIONS:
            raise ValueError(f"unknown blobseer_like option {name!r}; known: "
                             f"{', '.join(sorted(OPTIONS))}")
        if name in options:
            raise ValueError(f"blobseer_like option {name!r} given twice")
        options[name] = value
    values: dict[str, object] = {"providers": providers}
    if "chunk" in options:
        chunk = parse_size(options["chunk"])
        if not MIN_CHUNK <= chunk <= MAX_CHUNK:
            raise ValueError(f"blobseer_like option chunk={options['chunk']} must be between "
                             f"4KiB and 64MiB")
        values["chunk_size"] = chunk
    for name in ("cap", "burst"):
        if name in options:
            values[name] = parse_rate(options[name])
    if "standby" in options:
        standby = _dirs(options["standby"], "standby providers")
        if set(standby) & set(providers):
            raise ValueError("blobseer_like standby providers must differ from the active ones")
        values["standby"] = standby
    if "burst" in options and "standby" not in options:
        raise ValueError("blobseer_like option burst= needs standby= (providers to activate)")
    if "burst_window" in options:
        values["burst_window"] = _number("burst_window", options["burst_window"],
                                         minimum=0.1, integer=False)
    if "fanout" in options:
        values["fanout"] = int(_number("fanout", options["fanout"], minimum=1, integer=True))
    if "replicas" in options:
        values["replicas"] = int(_number("replicas", options["replicas"], minimum=1,
                                         integer=True))
    if "gc_interval" in options:
        values["gc_interval"] = _number("gc_interval", options["gc_interval"], minimum=0,
                                        integer=False)
    return BlobseerConfig(**values)  # type: ignore[arg-type]
