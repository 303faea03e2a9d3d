"""helm/squall/values.schema.json against the settings model (gateway/config/settings.py).

Every setting the chart passes to Squall (a ``config.*`` value, a key the chart writes
itself, a ``SQUALL_*`` variable of the container) must be a field of the model, and the
schema must take what the model takes: the same numbers, every size, rate and duration
the model reads, and not the malformed ones. Needs neither helm nor a cluster.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any, get_args

import jsonschema
import pytest
import yaml
from pydantic import ValidationError
from pydantic.fields import FieldInfo

from backends.core.unit_types import DURATION, RATE, SIZE, unit_of
from backends.s3.config import ACCESS_KEY_ENV, SECRET_KEY_ENV
from gateway.cluster.coordinator.settings import coordinator_settings, parse_endpoints
from gateway.config.settings import Settings

CHART = Path(__file__).resolve().parents[2] / "helm" / "squall"
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
CONFIG = SCHEMA["properties"]["config"]["properties"]
HELPERS = (CHART / "templates" / "_helpers.tpl").read_text()
TEMPLATES = "\n".join(p.read_text() for p in (CHART / "templates").rglob("*")
                      if p.is_file())
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)

#: Values of each kind that the model and the schema must both take or both refuse.
SAMPLES: dict[str, list[Any]] = {
    "size": ["1GiB", "64MB", "4096", 4096, "512 KiB", "8k", "1.5MB", 0, 8192, 1 << 30, -1,
             1.5, True],
    "rate": ["20MiB/s", "1.5GB/s", "100000", "8 kib/s", "100k", "3MB /s", 100000, 2.5, 0, -1,
             True],
    "duration": ["30s", "2m", "1h", "500ms", "0.5", ".5", "1e3", "1.5m", 0, 0.5, 30, 3600, -1,
                 True],
    "int": [-1, 0, 1, 31, 32, 40, 8192, 5242880, 1.5, "x"],
    "float": [-1, 0, 0.05, 0.3, 1, 2.5, 40, "x"],
    "bool": [True, False, "x"],
    "str": ["text", "eu-west-1"],
}
#: Malformed text both must refuse for a size, a rate or a duration.
MALFORMED = ["lots", "-1", "1 parsec", "GiB", "soon", "fast", "/s", "inf", "1 week", "1e3s"]


def kind(field: FieldInfo) -> str:
    unit = unit_of(field)
    if unit is not None:
        return unit.kind
    for name, python in (("bool", bool), ("int", int), ("float", float), ("str", str)):
        if field.annotation in (python, python | None):
            return name
    return "other"


def model_accepts(name: str, value: Any) -> bool:
    try:
        Settings(**{name: value})
    except ValidationError:
        return False
    return True


def schema_accepts(name: str, value: Any) -> bool:
    values = copy.deepcopy(VALUES)
    values["config"][name] = value
    return VALIDATOR.is_valid(values)


def test_the_default_values_are_valid() -> None:
    VALIDATOR.validate(VALUES)


def test_config_values_and_schema_list_the_same_settings() -> None:
    assert set(VALUES["config"]) == set(CONFIG)


@pytest.mark.parametrize("name", sorted(CONFIG))
def test_every_config_value_is_a_setting_of_the_same_type(name: str) -> None:
    assert name in Settings.model_fields, f"config.{name} is not a setting of squall serve"
    field = Settings.model_fields[name]
    if (choices := CONFIG[name].get("enum")) is not None:
        # The model's choices (a Literal's arguments) and every name the schema offers,
        # each tried on the model: the schema offers exactly what the model takes.
        candidates = {*get_args(field.annotation), *(c for c in choices if c is not None)}
        assert sorted(c for c in choices if c is not None) == sorted(
            c for c in candidates if isinstance(c, str) and model_accepts(name, c))
        return
    unit = unit_of(field)
    for value in SAMPLES[kind(field)]:
        if unit is not None and isinstance(value, str):
            # The schema cannot compare a string with a minimum (0 for a rate, a field's
            # own): that is refused when Squall starts. All it reads, the schema takes.
            if model_accepts(name, value):
                assert schema_accepts(name, value), (name, value)
        else:
            assert model_accepts(name, value) == schema_accepts(name, value), (name, value)
    if unit is not None:
        for text in MALFORMED:
            assert not model_accepts(name, text) and not schema_accepts(name, text), (name, text)
    default = VALUES["config"][name]
    if default is not None:
        assert model_accepts(name, default), (name, default)


@pytest.mark.parametrize("unit", [SIZE, RATE, DURATION], ids=lambda u: u.kind)
def test_the_unit_patterns_take_the_documented_examples(unit: Any) -> None:
    definition = {"$ref": f"#/definitions/{unit.kind}", "definitions": SCHEMA["definitions"]}
    for example in unit.examples:
        jsonschema.validate(example, definition)


def test_the_keys_the_chart_writes_itself_are_settings() -> None:
    body = HELPERS.split('define "squall.configToml"', 1)[1].split("{{- end -}}", 1)[0]
    written = set(re.findall(r"^(\w+) = ", body, re.MULTILINE))
    lists = re.findall(r"has \$name \(list ([^)]*)\)", body)
    reserved = set(re.findall(r'"(\w+)"', lists[0]))  # set by the chart
    refused = {name for text in lists[1:] for name in re.findall(r'"(\w+)"', text)}
    assert written == {"listen", "data_dir", "cache_dir", "backend"}
    assert written <= reserved
    assert {"coordinator", "coordinator_prefix", "lease_ttl", "advertise_url",
            "dirty_replicas", "etcd_password"} <= reserved
    assert refused == {"peers", "node_id", "tls_cert", "tls_key"}
    assert reserved | refused <= set(Settings.model_fields)
    assert not (reserved | refused) & set(CONFIG)  # the chart refuses them in config


#: Values of the chart that are Squall settings outside `config` (docs/kubernetes.md).
CLUSTER_VALUES = {("coordinator", "leaseTTL"): "lease_ttl",
                  ("dirtyReplicas",): "dirty_replicas"}


def values_accept(path: tuple[str, ...], value: Any) -> bool:
    values = copy.deepcopy(VALUES)
    node = values
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return bool(VALIDATOR.is_valid(values))


@pytest.mark.parametrize("path", sorted(CLUSTER_VALUES), ids=".".join)
def test_cluster_values_take_what_their_settings_take(path: tuple[str, ...]) -> None:
    name = CLUSTER_VALUES[path]
    assert name in Settings.model_fields
    for value in (-1, 0, 1, 2, 3, 5, 300, 301, 1.5):
        assert model_accepts(name, value) == values_accept(path, value), (path, value)
    node: Any = VALUES
    for key in path:
        node = node[key]
    assert model_accepts(name, node), (path, node)


@pytest.mark.parametrize("prefix", ["/squall/", "/", "/a/b/", "/a b/", "squall/", "/squall",
                                    ""])
def test_the_prefix_value_takes_what_squall_takes(prefix: str) -> None:
    try:
        coordinator_settings("etcd://etcd:2379", prefix=prefix)
        accepted = True
    except ValueError:
        accepted = False
    assert values_accept(("coordinator", "prefix"), prefix) == accepted, prefix


@pytest.mark.parametrize("endpoint", [
    "etcd:2379", "etcd", "169.254.0.1:2379", "[::1]:2379", "[fe80::5]", "etcd_0.local:2379",
    "etcd-0.etcd.ns.svc.cluster.local:65535", "etcd:65536", "etcd:port", "http://etcd:2379",
    "user@etcd:2379", "etcd:2379/path", "etcd:2379,other:2379", "", "et cd:2379"])
def test_the_endpoint_values_take_what_squall_takes(endpoint: str) -> None:
    try:
        parse_endpoints(f"etcd://{endpoint}")
        # one endpoint per list item; a host name with blanks gets through Squall's parser
        # but never resolves, and the schema refuses it at install
        accepted = "," not in endpoint and " " not in endpoint
    except ValueError:
        accepted = False
    assert values_accept(("coordinator", "endpoints"), [endpoint]) == accepted, endpoint


def test_the_environment_of_the_container_names_settings() -> None:
    names = set(re.findall(r"SQUALL_[A-Z0-9_]+", TEMPLATES)) - {ACCESS_KEY_ENV, SECRET_KEY_ENV}
    assert names, "the templates set no SQUALL_* variable"
    prefix = Settings.model_config.get("env_prefix", "")
    fields = {f"{prefix}{name.upper()}" for name in Settings.model_fields}
    assert names <= fields, names - fields


@pytest.mark.parametrize("path", sorted((CHART / "ci").glob("*-values.yaml")),
                         ids=lambda p: p.name)
def test_the_ci_value_sets_are_settings(path: Path) -> None:
    config = (yaml.safe_load(path.read_text()) or {}).get("config") or {}
    for name, value in config.items():
        assert model_accepts(name, value), (path.name, name, value)
        assert schema_accepts(name, value), (path.name, name, value)
