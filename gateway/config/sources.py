"""Where settings come from: defaults < TOML config file < ``SQUALL_*`` environment <
command-line flags, read with pydantic-settings' own sources.

A settings model is made of :class:`Section` models. The config file takes every field
by its name at the top level (``cache_size = "1GiB"``) or inside its section's table
(``[cache]`` with ``size = "1GiB"`` or ``cache_size = "1GiB"``); the environment takes
``<env_prefix><NAME>``. A bad value becomes a :class:`SettingsError` of one line that
names the flag, the variable or the file key it came from and what it expects.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    TomlConfigSettingsSource,
)
from pydantic_settings import SettingsError as SourceError

S = TypeVar("S", bound=BaseSettings)


class Section(BaseModel):
    """A component's settings. ``table`` names its config-file table (whose keys are the
    field names, or the field names without the ``<table>_`` prefix); ``title`` heads
    its group of flags in ``--help`` (None: the general options)."""

    table: ClassVar[str]
    title: ClassVar[str | None] = None


class EnvAndFileOnly:
    """Marks a field without a command-line flag (a table, or a secret that a flag would
    show in ``ps``); it is still a config key and an environment variable."""


ENV_AND_FILE_ONLY = EnvAndFileOnly()


def has_flag(field: FieldInfo) -> bool:
    """False for the fields marked :data:`ENV_AND_FILE_ONLY`."""
    return not any(isinstance(m, EnvAndFileOnly) for m in field.metadata)


def flag_name(name: str) -> str:
    """``cache_size`` -> ``--cache-size``."""
    return "--" + name.replace("_", "-")


class SettingsError(ValueError):
    """Settings that cannot be read or validated; one line per problem."""

    def __init__(self, *lines: str) -> None:
        super().__init__("\n".join(lines))
        self.lines = list(lines)


class SectionedTomlSource(TomlConfigSettingsSource):
    """The TOML file with each section's table flattened into field names. Keys that
    name no field stay as they are (validation refuses them); ``spelled`` maps a field
    to the key the file gave it (``cache.size``)."""

    def __init__(self, settings_cls: type[BaseSettings], toml_file: Path,
                 sections: Sequence[type[Section]]) -> None:
        self._sections = {s.table: s for s in sections}
        self._fields = settings_cls.model_fields  # the files are read before super() sets it
        self.spelled: dict[str, str] = {}
        super().__init__(settings_cls, toml_file)

    def _read_file(self, file_path: Any) -> dict[str, Any]:
        return self._flatten(super()._read_file(file_path), file_path)

    def _flatten(self, data: Mapping[str, Any], path: object) -> dict[str, Any]:
        fields = self._fields
        flat: dict[str, Any] = {}
        for key, value in data.items():
            section = self._sections.get(key)
            if section is None or key in fields or not isinstance(value, dict):
                pairs = [(key, key, value)]
            else:
                pairs = [(_field_in(section, key, inner), f"{key}.{inner}", v)
                         for inner, v in value.items()]
            for name, spelled, v in pairs:
                if name in flat:
                    raise SettingsError(f"config file {path}: {spelled} sets {name}, "
                                        f"already set as {self.spelled[name]}")
                flat[name] = v
                self.spelled[name] = spelled
        return flat


def _field_in(section: type[Section], table: str, key: str) -> str:
    """The field a key of ``[table]`` names (itself or ``<table>_<key>``); an unknown
    key comes back as ``table.key``."""
    for name in (key, f"{table}_{key}"):
        if name in section.model_fields:
            return name
    return f"{table}.{key}"


def read_settings(settings_cls: type[S], sections: Sequence[type[Section]],
                  config_file: Path | None, flags: Mapping[str, object]) -> S:
    """Validate the merged sources (see the module docstring); ``flags`` are given by
    field name, ``None`` meaning "not given"."""
    values: dict[str, Any] = {}
    # Where each value came from, as the text before and after a path inside it.
    origins: dict[str, tuple[str, str]] = {}
    if config_file is not None:
        source = _toml_source(settings_cls, sections, config_file)
        from_file = source()
        unknown = sorted(set(from_file) - set(settings_cls.model_fields))
        if unknown:
            raise SettingsError(f"unknown key(s) in config file {config_file}: "
                                f"{', '.join(unknown)}")
        values |= from_file
        origins |= {name: (source.spelled.get(name, name), f" in config file {config_file}")
                    for name in from_file}
    try:
        from_env = EnvSettingsSource(settings_cls)()
    except SourceError as exc:
        raise SettingsError(f"environment: {exc} (tables are given as JSON)") from exc
    prefix = settings_cls.model_config.get("env_prefix", "")
    values |= from_env
    origins |= {name: (f"{prefix}{name.upper()}", "") for name in from_env}
    given = {name: value for name, value in flags.items() if value is not None}
    values |= given
    origins |= {name: (flag_name(name), "") for name in given}
    try:
        return settings_cls(**values)
    except ValidationError as exc:
        lines = [_describe(error, origins, values) for error in exc.errors()]
        raise SettingsError(*dict.fromkeys(lines)) from exc


def _toml_source(settings_cls: type[BaseSettings], sections: Sequence[type[Section]],
                 path: Path) -> SectionedTomlSource:
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise SettingsError(f"cannot read config file {path}: {exc.strerror}") from exc
    try:
        return SectionedTomlSource(settings_cls, path, sections)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"config file {path} is not valid TOML: {exc}") from exc


def _describe(error: ErrorDetails, origins: Mapping[str, tuple[str, str]],
              values: Mapping[str, Any]) -> str:
    """``--cache-size: expected a size such as 1GiB, 64MB or 4096, got 'lots'``."""
    name, *rest = error["loc"]
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in rest)
    head, tail = origins.get(str(name), (str(name), ""))
    given = error.get("input") if rest else values.get(str(name), error.get("input"))
    return f"{head}{path}{tail}: {_reason(error, given)}"


def _reason(error: ErrorDetails, given: object) -> str:
    """The message, with the value as it was given when the message does not say it."""
    ctx = error.get("ctx") or {}
    if error["type"] == "value_error" and "error" in ctx:
        return str(ctx["error"])
    message = error["msg"]
    if "got" in ctx:
        return message  # a message of our own types, which says what it got
    text = message[:1].lower() + message[1:]
    if isinstance(given, (str, int, float)) and not isinstance(given, bool):
        text += f", got {given!r}"
    return text
