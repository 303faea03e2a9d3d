"""The settings model and its sources: every field as a flag, a ``SQUALL_*`` variable and
a config key (flat or in its section's table), typed values, precedence and messages."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import pytest
from pydantic.fields import FieldInfo

from backends.core.unit_types import DURATION, RATE, SIZE, unit_of
from gateway.config.flags import add_setting_flags
from gateway.config.settings import SECTIONS, Settings, load_settings
from gateway.config.sources import SettingsError, has_flag

#: The config keys (and so the SQUALL_* variables) that existed before the model was
#: generated; each must keep its name and meaning.
KEYS = [
    "listen", "data_dir", "backend", "domain", "region", "access_key", "secret_key", "sigv2",
    "durability", "min_part_size", "direct_io", "log_level", "access_log", "cache_size", "cache_dir",
    "cache_volumes", "cache_mode", "cache_volume_root", "cache_volume_bandwidth",
    "cache_min_size", "cache_max_size", "backend_bandwidth", "backend_bandwidth_estimate",
    "backend_iops", "max_dirty_age",
    "utilization_threshold", "inactivity_delay", "flush_concurrency", "cache_admission",
    "cost_backend_size_gb", "cost_cache_bandwidth_mb_s", "peers", "node_id", "cluster_secret",
    "peer_ca", "dirty_replicas", "coordinator", "coordinator_prefix", "lease_ttl",
    "advertise_url", "etcd_ca", "etcd_cert", "etcd_key", "etcd_user", "etcd_password",
    "tls_cert", "tls_key",
    "lifecycle_interval", "lifecycle_day_seconds",
    "workers", "worker_handover", "header_timeout", "body_idle_timeout", "keep_alive_timeout",
    "max_header_bytes", "max_header_count", "max_connections", "max_connections_per_client",
    "header_timeout_busy", "max_requests",
    "body_min_rate", "body_rate_grace", "body_deadline", "body_deadline_rate",
    "user_max_requests", "user_max_rate", "user_max_bandwidth",
    "backend_probe_interval", "public_status", "status_token", "users_file",
    "default_object_ownership", "default_public_access_block", "qos"
]
#: The flags of `squall serve` before they were generated.
FLAGS = [
    "--listen", "--data-dir", "--backend", "--domain", "--region", "--no-sigv2",
    "--durability", "--min-part-size", "--cache-size", "--cache-dir", "--cache-mode",
    "--cache-volume-root", "--cache-volume-bandwidth", "--cache-min-size",
    "--cache-max-size", "--max-dirty-age", "--utilization-threshold", "--inactivity-delay",
    "--flush-concurrency", "--cache-admission", "--backend-bandwidth", "--backend-iops",
    "--cost-backend-size-gb", "--cost-cache-bandwidth-mb-s", "--lifecycle-interval",
    "--lifecycle-day-seconds", "--workers", "--no-worker-handover", "--peers", "--node-id",
    "--cluster-secret", "--peer-ca", "--dirty-replicas", "--coordinator", "--tls-cert",
    "--tls-key", "--header-timeout", "--body-idle-timeout",
    "--keep-alive-timeout", "--max-header-bytes", "--max-header-count", "--max-connections",
    "--max-requests", "--backend-probe-interval", "--public-status", "--status-token",
    "--log-level"
]

SECRET = "s" * 24
#: Values of the fields whose text a type alone does not tell: (as written, as read).
SPECIAL: dict[str, tuple[str, Any]] = {
    "listen": ("169.254.0.1:9100", "169.254.0.1:9100"),
    "backend": ("posix:/srv/x", "posix:/srv/x"),
    "peers": ("http://a:1,http://b:1", ["http://a:1", "http://b:1"]),
    "secret_key": (SECRET, SECRET), "status_token": (SECRET, SECRET),
    "cluster_secret": (SECRET, SECRET),
}


@pytest.fixture(autouse=True)
def _no_squall_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("SQUALL_"):
            monkeypatch.delenv(name)


def sample(name: str, field: FieldInfo) -> tuple[str, Any]:
    """A valid value of a field as text, and as the model reads it (not the default)."""
    if name in SPECIAL:
        return SPECIAL[name]
    unit = unit_of(field)
    if unit is SIZE:
        return "64MiB", 64 * 2**20
    if unit is RATE:
        return "20MiB/s", 20.0 * 2**20
    if unit is DURATION:
        return "2m", 120.0
    if get_origin(field.annotation) is Literal:
        choice = next(c for c in get_args(field.annotation) if c != field.default)
        return choice, choice
    kinds = {a for a in get_args(field.annotation) if a is not type(None)} or {field.annotation}
    kind = kinds.pop()
    if kind is bool:
        return ("false", False) if field.default else ("true", True)
    if kind is int:
        return "40", 40
    if kind is float:
        return "0.25", 0.25
    if kind is Path:
        return "/tmp/squall-x", Path("/tmp/squall-x")
    return "text", "text"


SCALARS = [(name, field) for name, field in Settings.model_fields.items() if has_flag(field)]


def test_every_existing_key_is_a_field_and_every_field_has_a_section() -> None:
    assert sorted(Settings.model_fields) == sorted(KEYS)
    in_sections = [name for section in SECTIONS for name in section.model_fields]
    assert sorted(in_sections) == sorted(KEYS)  # each in exactly one section
    tables = [section.table for section in SECTIONS]
    assert len(set(tables)) == len(tables)
    assert not set(tables) & (set(KEYS) - {"qos"})  # a table never hides a key


@pytest.mark.parametrize(("name", "field"), Settings.model_fields.items(),
                         ids=list(Settings.model_fields))
def test_every_field_has_a_description(name: str, field: FieldInfo) -> None:
    assert field.description, name


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="squall serve", exit_on_error=False)
    add_setting_flags(parser, SECTIONS)
    return parser


def test_flags_are_generated_for_every_field() -> None:
    spellings = [s for action in _parser()._actions for s in action.option_strings
                 if s not in ("-h", "--help")]
    assert len(spellings) == len(set(spellings))
    assert set(FLAGS) <= set(spellings)
    flagged = {action.dest for action in _parser()._actions} - {"help"}
    without = {name for name, field in Settings.model_fields.items() if not has_flag(field)}
    assert flagged == set(Settings.model_fields) - without
    # Without a flag: tables, and the admin key pair (a flag would show it in ps).
    assert without == {"cache_volumes", "qos", "access_key", "secret_key"}


@pytest.mark.parametrize(("name", "field"), SCALARS, ids=[n for n, _ in SCALARS])
def test_every_flag(name: str, field: FieldInfo) -> None:
    text, value = sample(name, field)
    spelling = next(a for a in _parser()._actions if a.dest == name).option_strings[0]
    args = [spelling] if field.annotation is bool else [spelling, text]
    parsed = vars(_parser().parse_args(args))
    assert all(v is None for k, v in parsed.items() if k != name)  # not given: None
    assert getattr(load_settings(**parsed), name) == value


@pytest.mark.parametrize(("name", "field"), Settings.model_fields.items(),
                         ids=list(Settings.model_fields))
def test_every_environment_variable(name: str, field: FieldInfo,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    if name == "cache_volumes":
        text, value = '[{"path": "/v", "capacity_bytes": "1GiB"}]', 2**30
        monkeypatch.setenv("SQUALL_CACHE_VOLUMES", text)
        assert [v.capacity_bytes for v in load_settings().cache_volumes or []] == [value]
        return
    if name == "qos":
        monkeypatch.setenv("SQUALL_QOS", '{"interval": "500ms", "buckets": '
                                         '{"b": {"g0_bandwidth": "10MB/s"}}}')
        qos = load_settings().qos
        assert qos.interval == 0.5 and qos.buckets["b"].g0_bandwidth == 10e6
        return
    text, value = sample(name, field)
    monkeypatch.setenv(f"SQUALL_{name.upper()}", text)
    assert getattr(load_settings(), name) == value


def _toml(value: str) -> str:
    return json.dumps(value)  # a TOML basic string


def _short_key(section_table: str, name: str) -> str:
    return name.removeprefix(f"{section_table}_")


@pytest.mark.parametrize("form", ["flat", "table", "table-full-name"])
def test_every_key_in_a_flat_or_nested_file(tmp_path: Path, form: str) -> None:
    lines: list[str] = []
    expected: dict[str, Any] = {}
    for section in SECTIONS:
        if form != "flat":
            lines.append(f"[{section.table}]")
        for name, field in section.model_fields.items():
            if not has_flag(field):
                continue
            text, expected[name] = sample(name, field)
            key = _short_key(section.table, name) if form == "table" else name
            lines.append(f"{key} = {_toml(text)}")
    config = tmp_path / "squall.toml"
    config.write_text("\n".join(lines) + "\n")
    settings = load_settings(config)
    assert {name: getattr(settings, name) for name in expected} == expected


def test_tables_of_the_file(tmp_path: Path) -> None:
    config = tmp_path / "squall.toml"
    config.write_text('region = "eu-west-1"\n'
                      '[cache]\nsize = "2GiB"\nmax_dirty_age = "5m"\n'
                      f'[[cache.volumes]]\npath = "{tmp_path / "v1"}"\ncapacity_bytes = "1GiB"\n'
                      '[qos]\ninterval = "2s"\n[qos.buckets.hot]\ng0_bandwidth = "10MB/s"\n')
    settings = load_settings(config)
    assert (settings.region, settings.cache_size, settings.max_dirty_age) == (
        "eu-west-1", 2 * 2**30, 300.0)
    assert [v.capacity_bytes for v in settings.cache_volumes or []] == [2**30]
    assert settings.qos.interval == 2.0 and settings.qos.buckets["hot"].g0_bandwidth == 10e6


def test_file_errors(tmp_path: Path) -> None:
    config = tmp_path / "squall.toml"
    config.write_text('cache_size = "1GiB"\n[cache]\nsize = "2GiB"\n')
    with pytest.raises(SettingsError, match="cache.size sets cache_size, already set as "
                                            "cache_size"):
        load_settings(config)
    config.write_text('[cache]\ncolour = "blue"\n[tls]\ncert = "/c"\n')
    with pytest.raises(SettingsError, match=r"unknown key\(s\) in config file .*: cache.colour"):
        load_settings(config)
    config.write_text('[cache]\nsize = "lots"\n')
    with pytest.raises(SettingsError) as caught:
        load_settings(config)
    assert caught.value.lines == [(f"cache.size in config file {config}: expected a size "
                                   "such as 1GiB, 64MB or 4096, got 'lots'")]
    config.write_text('[[cache_volumes]]\npath = "/v"\ncapacity_bytes = "lots"\n')
    with pytest.raises(SettingsError, match=r"^cache_volumes\[0\]\.capacity_bytes in config "):
        load_settings(config)


def test_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "squall.toml"
    config.write_text('[cache]\nsize = "1MiB"\nmax_dirty_age = "1m"\ninactivity_delay = "1s"\n')
    monkeypatch.setenv("SQUALL_CACHE_SIZE", "2MiB")
    monkeypatch.setenv("SQUALL_MAX_DIRTY_AGE", "2m")
    settings = load_settings(config, cache_size="3MiB", max_dirty_age=None)
    assert settings.cache_size == 3 * 2**20  # the flag beats the environment
    assert settings.max_dirty_age == 120.0  # the environment beats the file
    assert settings.inactivity_delay == 1.0  # the file beats the default
    assert settings.utilization_threshold == 0.3  # the default


@pytest.mark.parametrize(("args", "env", "message"), [
    (["--cache-size", "lots"], {},
     "squall: --cache-size: expected a size such as 1GiB, 64MB or 4096, got 'lots'"),
    ([], {"SQUALL_BACKEND_BANDWIDTH": "fast"},
     ("squall: SQUALL_BACKEND_BANDWIDTH: expected a rate such as 20MiB/s, 1.5GB/s or "
      "100000, got 'fast'")),
    (["--header-timeout", "soon"], {},
     "squall: --header-timeout: expected a duration such as 30s, 2m, 1h or 0.5, got 'soon'"),
    (["--max-requests", "many"], {},
     ("squall: --max-requests: input should be a valid integer, unable to parse string as "
      "an integer, got 'many'")),
    (["--keep-alive-timeout", "0"], {},
     "squall: --keep-alive-timeout: input should be greater than 0, got '0'"),
])
def test_bad_values_give_one_line_naming_their_source(
        tmp_path: Path, args: list[str], env: dict[str, str], message: str) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SQUALL_")}
    result = subprocess.run([sys.executable, "-m", "gateway.commands.cli", "serve", "--data-dir",
                             str(tmp_path / "d"), *args], env={**base, **env},
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [message]
    assert not (tmp_path / "d").exists()


def test_help_shows_every_option_once_with_defaults() -> None:
    result = subprocess.run([sys.executable, "-m", "gateway.commands.cli", "serve", "--help"],
                            capture_output=True, text=True, timeout=60, check=True)
    entries = re.findall(r"^  (--[a-z0-9-]+)", result.stdout, re.MULTILINE)
    assert len(entries) == len(set(entries)) and set(FLAGS) <= set(entries)
    body = " ".join(result.stdout.split())
    assert "--cache-size SIZE cache capacity; 0 disables it (default 1GiB)" in body
    assert "--max-dirty-age DURATION" in body and "(default 300s)" in body
    assert "--backend-bandwidth RATE" in body
    assert "--no-sigv2 turn off (on by default)" in body


def test_the_documented_config_file_loads(tmp_path: Path) -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "configuration.md").read_text()
    example = re.search(r"^```toml\n(.*?)^```", doc, re.MULTILINE | re.DOTALL)
    assert example is not None
    config = tmp_path / "squall.toml"
    config.write_text(example.group(1))
    settings = load_settings(config)
    assert (settings.cache_size, settings.backend_bandwidth) == (8 * 2**30, 200 * 2**20)
    assert (settings.max_dirty_age, settings.lifecycle_interval) == (300.0, 3600.0)
    assert [v.capacity_bytes for v in settings.cache_volumes or []] == [100 * 2**30]
    assert settings.qos.buckets["checkpoints"].g0_bandwidth == 64 * 2**20


def test_the_sections_take_the_defaults_of_the_components_they_build() -> None:
    """Each default has one source: what the settings build by default is what the
    component's own settings are by default."""
    from backends.registry import BackendOptions
    from gateway.cache.settings import CacheSettings, ElasticSettings
    from gateway.cluster.coordinator.settings import coordinator_settings
    from gateway.components import cache_settings
    from gateway.qos.shares import ShareLimits

    settings = Settings()
    assert cache_settings(settings).model_dump(exclude={"volumes"}) \
        == CacheSettings().model_dump(exclude={"volumes"})
    assert settings.cache_min_size == ElasticSettings.model_fields["min_size_bytes"].default
    options = BackendOptions(data_dir=Path("d"))
    assert (settings.durability, settings.min_part_size, settings.direct_io) \
        == (options.durability, options.min_part_size, options.direct_io)
    etcd = coordinator_settings("etcd://localhost:2379")
    assert (settings.coordinator_prefix, settings.lease_ttl) == (etcd.prefix, etcd.lease_ttl_s)
    assert ShareLimits(max_requests=settings.user_max_requests, max_rate=settings.user_max_rate,
                       max_bandwidth=settings.user_max_bandwidth) == ShareLimits()
