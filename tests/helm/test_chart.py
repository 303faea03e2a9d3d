"""The Helm chart (helm/squall).

scripts/check-helm.sh lints the chart, renders it with the default values and every value
set in helm/squall/ci/, and validates each rendering with kubeconform; these tests run it,
then check facts of the renderings that schemas cannot: how the pods reach etcd and what
they advertise, the chart's own etcd, the preStop hook, the probes, the volumes, the
Secret wiring. The rendered config file and credentials also start a real gateway, and
two rendered members register in a real etcd and leave through the rendered preStop hook.
Without Go (so without helm) the tests are skipped, saying why.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import time
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
import yaml
from botocore.config import Config

from backends.s3.config import parse_config
from gateway.config.settings import Settings, load_settings
from tests.support.etcd import EtcdServer
from tests.support.server import SquallProcess, free_port

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "check-helm.sh"
CHART = REPO / "helm" / "squall"
KUBE_VERSIONS = ("1.28.0", "1.36.0")  # as in scripts/check-helm.sh
NAMESPACE = "squall"  # the namespace check-helm.sh renders into
VALUE_SETS = ("default", *sorted(p.name.removesuffix("-values.yaml")
                                 for p in (CHART / "ci").glob("*-values.yaml")))
HEALTH = "/_squall/health"

# The first run builds helm with `go install` (a few minutes); later runs reuse it.
pytestmark = pytest.mark.timeout(1800)


def _run_script(*args: str, out: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable}
    if out is not None:
        env["SQUALL_HELM_OUT"] = str(out)
    return subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, text=True,
                          timeout=1700, check=False)


def _tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])


@pytest.fixture(scope="module")
def tools() -> dict[str, str]:
    """Paths of helm, kubeconform and the schemas, installed on first use."""
    proc = _run_script("--install")
    if proc.returncode == 3:
        pytest.skip(f"helm and kubeconform cannot be installed: {_tail(proc.stderr, 1)}")
    assert proc.returncode == 0, (
        f"installing the chart's tools failed (exit {proc.returncode}):\n{_tail(proc.stderr)}")
    return dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)


@pytest.fixture(scope="module")
def renderings(tools: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of renderings <value set>-<kubernetes version>.yaml, all checked."""
    out = tmp_path_factory.mktemp("helm")
    proc = _run_script(out=out)
    assert proc.returncode == 0, (
        f"scripts/check-helm.sh failed (exit {proc.returncode}): helm lint, helm template or "
        f"kubeconform refused the chart:\n{_tail(proc.stdout)}\n{_tail(proc.stderr)}")
    return out


def manifests(renderings: Path, value_set: str,
              kube: str = KUBE_VERSIONS[-1]) -> dict[tuple[str, str], dict[str, Any]]:
    """The rendered resources of one value set, by (kind, name)."""
    docs = yaml.safe_load_all((renderings / f"{value_set}-{kube}.yaml").read_text())
    return {(d["kind"], d["metadata"]["name"]): d for d in docs if d}


def one(resources: dict[tuple[str, str], dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [r for (k, _), r in resources.items() if k == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def container(resources: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    spec = gateway_set(resources)["spec"]["template"]["spec"]
    (squall,) = spec["containers"]
    return squall


def env_of(resources: dict[tuple[str, str], dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container(resources)["env"]}


def config_file(resources: dict[tuple[str, str], dict[str, Any]]) -> str:
    (found,) = [r for (k, _), r in resources.items()
                if k == "ConfigMap" and "squall.toml" in r["data"]]
    return str(found["data"]["squall.toml"])


def test_without_go_the_script_says_so(tmp_path: Path) -> None:
    """Exit 3 (what makes the fixtures skip) with the reason, when Go cannot be found."""
    proc = subprocess.run(
        [str(SCRIPT), "--install"], capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "SQUALL_TOOLS": str(tmp_path), "SQUALL_GO": str(tmp_path / "go")})
    assert proc.returncode == 3, proc.stderr
    assert "Go is not installed" in proc.stderr


def test_every_value_set_is_rendered_for_every_kubernetes_version(renderings: Path) -> None:
    for value_set in VALUE_SETS:
        for kube in KUBE_VERSIONS:
            assert manifests(renderings, value_set, kube), (value_set, kube)
    assert {"default", "single", "cluster", "s3", "existing-secret", "external-etcd",
            "endpoints"} <= set(VALUE_SETS)


def gateway_set(resources: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    """The gateway StatefulSet (not the etcd one)."""
    (found,) = [r for (k, n), r in resources.items()
                if k == "StatefulSet" and r["spec"]["template"]["spec"]["containers"][0]
                ["name"] == "squall"]
    return found


def etcd_set(resources: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any] | None:
    """The chart's etcd StatefulSet, if rendered."""
    found = [r for (k, _), r in resources.items()
             if k == "StatefulSet" and r["spec"]["template"]["spec"]["containers"][0]
             ["name"] == "etcd"]
    assert len(found) <= 1
    return found[0] if found else None


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


#: The value sets whose pods coordinate through etcd (a shared backend), and how.
COORDINATED = {"cluster": "chart", "s3": "chart", "external-etcd": "external",
               "endpoints": "external", "existing-secret": "external"}
#: Values of the Secret keys the pods read (what a test puts in their environment).
FAKE_SECRETS = {"etcd-password": "etcd-password-of-squall", "password": "from-a-secret"}


def pod_env(resources: dict[tuple[str, str], dict[str, Any]], pod: str) -> dict[str, str]:
    """The container's environment as the kubelet gives it to pod ``pod``: values from
    the chart's Secret (or FAKE_SECRETS for existing ones), $(POD_NAME) expanded."""
    secrets = {k: base64.b64decode(v).decode() for r in resources.values()
               if r["kind"] == "Secret" for k, v in r["data"].items()}
    env: dict[str, str] = {}
    for entry in container(resources)["env"]:
        source = entry.get("valueFrom", {})
        if "value" in entry:
            env[entry["name"]] = entry["value"].replace("$(POD_NAME)", env.get("POD_NAME", ""))
        elif "fieldRef" in source:
            assert source["fieldRef"]["fieldPath"] == "metadata.name", entry
            env[entry["name"]] = pod
        elif (key := source["secretKeyRef"]["key"]) in secrets:
            env[entry["name"]] = secrets[key]
        elif key in FAKE_SECRETS:
            env[entry["name"]] = FAKE_SECRETS[key]
        else:
            env[entry["name"]] = f"{key}-of-an-existing-secret".lower()
    return env


@pytest.mark.usefixtures("no_squall_env")
@pytest.mark.parametrize("value_set", sorted(COORDINATED))
def test_each_pod_registers_its_stable_name_in_etcd(
        renderings: Path, value_set: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No member list: every pod advertises its own DNS name and the same etcd, and
    Squall's own settings loader makes a member of that from the rendered config file and
    environment."""
    resources = manifests(renderings, value_set)
    sts = gateway_set(resources)
    name, headless = sts["metadata"]["name"], sts["spec"]["serviceName"]
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    env = env_of(resources)
    assert not {"SQUALL_PEERS", "SQUALL_NODE_ID", "SQUALL_PEERS_FILE"} & env.keys()
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    names = [e["name"] for e in container(resources)["env"]]
    assert names.index("POD_NAME") < names.index("SQUALL_ADVERTISE_URL")  # (expansion)
    port = container(resources)["ports"][0]["containerPort"]
    assert env["SQUALL_ADVERTISE_URL"]["value"] == (
        f"http://$(POD_NAME).{headless}.{NAMESPACE}.svc.cluster.local:{port}")
    service = resources[("Service", headless)]["spec"]
    assert service["clusterIP"] == "None" and service["publishNotReadyAddresses"] is True
    assert matches(service["selector"], sts["spec"]["template"]["metadata"]["labels"])

    values = yaml.safe_load((CHART / "ci" / f"{value_set}-values.yaml").read_text())
    coordinator = values.get("coordinator", {})
    for variable, value in pod_env(resources, f"{name}-1").items():
        if variable.startswith("SQUALL_") and variable[7:].lower() in Settings.model_fields:
            monkeypatch.setenv(variable, value)
    clustering = load_settings_from(config_file(resources), tmp_path).clustering()
    assert clustering is not None and clustering.coordinator is not None
    assert clustering.advertise_url == (
        f"http://{name}-1.{headless}.{NAMESPACE}.svc.cluster.local:{port}")
    assert clustering.secret and clustering.workers == 1
    etcd = clustering.coordinator
    assert etcd.prefix == coordinator.get("prefix", "/squall/")
    assert etcd.lease_ttl_s == coordinator.get("leaseTTL", 5)
    assert clustering.dirty_replicas == values.get("dirtyReplicas", 2)
    if COORDINATED[value_set] == "external":
        assert etcd_set(resources) is None
        assert [f"{h}:{p}" for h, p in etcd.endpoints] == [
            e if ":" in e else f"{e}:2379" for e in coordinator["endpoints"]]
    else:
        etcd_pods = etcd_set(resources)
        assert etcd_pods is not None
        args = etcd_pods["spec"]["template"]["spec"]["containers"][0]["args"]
        (advertised,) = [a.split("=", 1)[1] for a in args
                         if a.startswith("--advertise-client-urls=")]
        etcd_name = etcd_pods["metadata"]["name"]
        assert [f"{h}:{p}" for h, p in etcd.endpoints] == [
            advertised.replace("$(POD_NAME)", f"{etcd_name}-{i}").removeprefix("http://")
            for i in range(etcd_pods["spec"]["replicas"])]
    assert etcd.tls == bool(coordinator.get("tls", {}).get("enabled"))
    assert (etcd.user, etcd.password) == (
        (coordinator["user"], FAKE_SECRETS["etcd-password" if "password" in coordinator
                                            else "password"])
        if "user" in coordinator else (None, None))


@pytest.mark.parametrize(("value_set", "members"), [("s3", 3), ("cluster", 5)])
def test_the_charts_etcd_bootstraps_its_members_statically(
        renderings: Path, value_set: str, members: int) -> None:
    resources = manifests(renderings, value_set)
    etcd = etcd_set(resources)
    assert etcd is not None
    name, headless = etcd["metadata"]["name"], etcd["spec"]["serviceName"]
    spec = etcd["spec"]
    assert spec["replicas"] == members and spec["podManagementPolicy"] == "Parallel"
    pod = spec["template"]["spec"]
    (member,) = pod["containers"]
    assert re.fullmatch(r"(gcr\.io/etcd-development|quay\.io/coreos)/etcd:v3\.5\.\d+",
                        member["image"]), member["image"]
    domain = f"{headless}.{NAMESPACE}.svc.cluster.local"
    args = dict(a.removeprefix("--").split("=", 1) for a in member["args"])
    assert args["name"] == "$(POD_NAME)"
    assert {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} \
        in member["env"]
    assert args["initial-cluster"] == ",".join(
        f"{name}-{i}=http://{name}-{i}.{domain}:2380" for i in range(members))
    assert args["initial-cluster-state"] == "new"
    assert args["initial-advertise-peer-urls"] == f"http://$(POD_NAME).{domain}:2380"
    assert args["advertise-client-urls"] == f"http://$(POD_NAME).{domain}:2379"
    mount = {m["name"]: m["mountPath"] for m in member["volumeMounts"]}
    assert args["data-dir"].startswith(mount["data"] + "/")
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert member[probe]["httpGet"]["port"] == "client", probe
        assert member[probe]["httpGet"]["path"].startswith("/health"), probe
    assert {p["name"]: p["containerPort"] for p in member["ports"]} == {
        "client": 2379, "peer": 2380}
    (claim,) = spec["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["resources"]["requests"]["storage"] == (
        "4Gi" if value_set == "cluster" else "8Gi")
    if value_set == "cluster":
        assert claim["spec"]["storageClassName"] == "ssd"
        assert "--election-timeout=2000" in member["args"]
        assert "requiredDuringSchedulingIgnoredDuringExecution" in \
            pod["affinity"]["podAntiAffinity"]
    else:
        assert "storageClassName" not in claim["spec"]
        assert "preferredDuringSchedulingIgnoredDuringExecution" in \
            pod["affinity"]["podAntiAffinity"]
    assert member["resources"]["requests"] and member["securityContext"]
    # the members find each other before they are ready; clients use a Service
    labels = spec["template"]["metadata"]["labels"]
    peers = resources[("Service", headless)]["spec"]
    assert peers["clusterIP"] == "None" and peers["publishNotReadyAddresses"] is True
    assert matches(peers["selector"], labels)
    client = resources[("Service", name)]["spec"]
    assert matches(client["selector"], labels)
    assert [p["port"] for p in client["ports"]] == [2379]
    budget = resources[("PodDisruptionBudget", name)]["spec"]
    assert budget["maxUnavailable"] == 1 and matches(budget["selector"]["matchLabels"], labels)
    # no selector of the gateway takes etcd pods in, and none of etcd's takes gateways
    gateway = gateway_set(resources)
    gateway_labels = gateway["spec"]["template"]["metadata"]["labels"]
    selectors = [gateway["spec"]["selector"]["matchLabels"]] + [
        r["spec"]["selector"] for (k, n), r in resources.items()
        if k == "Service" and not n.startswith(name)] + [
        r["spec"]["selector"]["matchLabels"] for (k, n), r in resources.items()
        if k == "PodDisruptionBudget" and n != name]
    assert all(not matches(s, labels) for s in selectors)
    assert all(matches(s, gateway_labels) for s in selectors)
    assert not matches(spec["selector"]["matchLabels"], gateway_labels)


def test_an_external_etcd_over_tls_with_a_password(renderings: Path) -> None:
    resources = manifests(renderings, "external-etcd")
    env = env_of(resources)
    volumes = {v["name"]: v for v in gateway_set(resources)["spec"]["template"]["spec"]
               ["volumes"]}
    mounts = {m["name"]: m for m in container(resources)["volumeMounts"]}
    assert mounts["etcd-tls"] == {"name": "etcd-tls", "mountPath": "/etc/squall-etcd-tls",
                                  "readOnly": True}
    secret = volumes["etcd-tls"]["secret"]
    assert secret["secretName"] == "squall-etcd-client"
    files = {item["key"]: item["path"] for item in secret["items"]}
    assert files == {"ca.crt": "ca.pem", "tls.crt": "cert.pem", "tls.key": "key.pem"}
    for variable, key in (("SQUALL_ETCD_CA", "ca.crt"), ("SQUALL_ETCD_CERT", "tls.crt"),
                          ("SQUALL_ETCD_KEY", "tls.key")):
        assert env[variable]["value"] == f"/etc/squall-etcd-tls/{files[key]}"
    assert env["SQUALL_COORDINATOR"]["value"].startswith("etcds://")
    assert env["SQUALL_ETCD_USER"]["value"] == "squall"
    chart_secret = one(resources, "Secret")
    ref = env["SQUALL_ETCD_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": chart_secret["metadata"]["name"], "key": "etcd-password"}
    assert base64.b64decode(chart_secret["data"]["etcd-password"]) == b"etcd-password-of-squall"
    # from an existing Secret instead
    env = env_of(manifests(renderings, "existing-secret"))
    assert env["SQUALL_ETCD_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "squall-etcd-password", "key": "password"}
    assert env["SQUALL_COORDINATOR"]["value"] == "etcd://etcd.platform.svc.cluster.local:2379"


@pytest.mark.parametrize("value_set", sorted(COORDINATED))
def test_a_leaving_pod_hands_over_within_its_grace_period(
        renderings: Path, value_set: str) -> None:
    resources = manifests(renderings, value_set)
    pod = gateway_set(resources)["spec"]["template"]["spec"]
    grace = pod["terminationGracePeriodSeconds"]
    values = yaml.safe_load((CHART / "ci" / f"{value_set}-values.yaml").read_text())
    sleep = values.get("preStopSleepSeconds", 5)
    command = container(resources)["lifecycle"]["preStop"]["exec"]["command"]
    assert command[:2] == ["sh", "-c"]
    lines = command[2].splitlines()
    timeout = grace - sleep - 30  # SIGTERM then takes up to 30 s
    assert lines[0] == (f"squall cluster leave --endpoint http://127.0.0.1:9000 "
                        f"--timeout {timeout}; status=$?")
    assert timeout >= 30
    assert lines[1:] == ([f"sleep {sleep}"] if sleep else []) + ["exit $status"]
    credentials = env_of(resources)
    assert {"SQUALL_ACCESS_KEY", "SQUALL_SECRET_KEY"} <= credentials.keys()


@pytest.mark.parametrize("value_set", ["default", "single"])
def test_one_pod_with_its_own_backend_runs_alone(renderings: Path, value_set: str) -> None:
    resources = manifests(renderings, value_set)
    env = env_of(resources)
    assert not {"SQUALL_COORDINATOR", "SQUALL_ADVERTISE_URL", "SQUALL_CLUSTER_SECRET",
                "SQUALL_DIRTY_REPLICAS", "POD_NAME"} & env.keys()
    assert etcd_set(resources) is None
    assert not [n for _, n in resources if "etcd" in n]
    lifecycle = container(resources).get("lifecycle")
    if value_set == "default":
        assert lifecycle == {"preStop": {"exec": {"command": ["sleep", "5"]}}}
    else:  # preStopSleepSeconds: 0
        assert lifecycle is None


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_probes_use_the_health_endpoint(renderings: Path, value_set: str) -> None:
    squall = container(manifests(renderings, value_set))
    assert [p["name"] for p in squall["ports"]] == ["http"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert squall[probe]["httpGet"] == {"path": HEALTH, "port": "http"}, probe
    assert squall["args"][:3] == ["serve", "--config", "/etc/squall/squall.toml"]


def test_default_pods_claim_a_data_and_a_cache_volume(renderings: Path) -> None:
    resources = manifests(renderings, "default")
    sts = gateway_set(resources)
    claims = {c["metadata"]["name"]: c["spec"] for c in sts["spec"]["volumeClaimTemplates"]}
    assert claims["data"]["resources"]["requests"]["storage"] == "5Gi"
    assert claims["cache"]["resources"]["requests"]["storage"] == "10Gi"
    assert all(c["accessModes"] == ["ReadWriteOnce"] for c in claims.values())
    mounts = {m["name"]: m["mountPath"] for m in container(resources)["volumeMounts"]}
    config = tomllib.loads(config_file(resources))
    assert mounts["data"] == config["data_dir"] == "/var/lib/squall"
    assert mounts["cache"] == config["cache_dir"] == "/var/lib/squall-cache"
    assert config["backend"] == "posix:/var/lib/squall/objects"
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain", "whenScaled": "Retain"}


def test_value_sets_change_the_volumes(renderings: Path) -> None:
    single = gateway_set(manifests(renderings, "single"))["spec"]
    (claim,) = single["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data" and claim["spec"]["storageClassName"] == ""
    scratch = manifests(renderings, "existing-secret")
    spec = gateway_set(scratch)["spec"]
    assert "volumeClaimTemplates" not in spec
    volumes = {v["name"]: v for v in spec["template"]["spec"]["volumes"]}
    assert volumes["data"] == {"name": "data", "emptyDir": {}}
    cluster = manifests(renderings, "cluster")
    volumes = {v["name"]: v for v in gateway_set(cluster)["spec"]["template"]["spec"]
               ["volumes"]}
    assert volumes["backend"]["persistentVolumeClaim"] == {"claimName": "shared-objects"}
    mount = next(m for m in container(cluster)["volumeMounts"] if m["name"] == "backend")
    assert mount == {"name": "backend", "mountPath": "/srv/squall-backend",
                     "subPath": "squall"}
    assert 'backend = "posix:/srv/squall-backend"' in config_file(cluster)


def test_generated_secret_holds_every_key_the_pods_read(renderings: Path) -> None:
    resources = manifests(renderings, "default")
    secret = one(resources, "Secret")
    keys = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert keys.keys() == {"access-key", "secret-key", "cluster-secret", "status-token"}
    assert len(keys["status-token"]) == 40
    assert keys["access-key"].startswith("SQ") and len(keys["access-key"]) == 20
    assert len(keys["secret-key"]) == 40 and len(keys["cluster-secret"]) == 48
    for name, key in (("SQUALL_ACCESS_KEY", "access-key"), ("SQUALL_SECRET_KEY", "secret-key")):
        ref = env_of(resources)[name]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": secret["metadata"]["name"], "key": key}


def test_existing_secrets_replace_the_generated_one(renderings: Path) -> None:
    resources = manifests(renderings, "existing-secret")
    assert not [r for (kind, _), r in resources.items() if kind == "Secret"]
    refs = {name: e["valueFrom"]["secretKeyRef"] for name, e in env_of(resources).items()
            if "secretKeyRef" in e.get("valueFrom", {})}
    assert refs == {
        "SQUALL_ACCESS_KEY": {"name": "squall-credentials", "key": "AWS_ACCESS_KEY_ID"},
        "SQUALL_SECRET_KEY": {"name": "squall-credentials", "key": "AWS_SECRET_ACCESS_KEY"},
        "SQUALL_CLUSTER_SECRET": {"name": "squall-credentials", "key": "CLUSTER_SECRET"},
        "SQUALL_STATUS_TOKEN": {"name": "squall-credentials", "key": "status-token",
                                "optional": True},
        "SQUALL_UPSTREAM_ACCESS_KEY": {"name": "minio-credentials",
                                       "key": "upstream-access-key"},
        "SQUALL_UPSTREAM_SECRET_KEY": {"name": "minio-credentials",
                                       "key": "upstream-secret-key"},
        "SQUALL_ETCD_PASSWORD": {"name": "squall-etcd-password", "key": "password"},
    }
    sts = gateway_set(resources)
    assert "checksum/secret" not in sts["spec"]["template"]["metadata"]["annotations"]
    assert sts["spec"]["template"]["spec"]["serviceAccountName"] == "squall"


@pytest.mark.usefixtures("no_squall_env")
def test_s3_backend_url_and_upstream_keys(renderings: Path, tmp_path: Path) -> None:
    resources = manifests(renderings, "s3")
    config = load_settings_from(config_file(resources), tmp_path)
    spec = config.backend_spec
    assert spec.kind == "s3"
    upstream = parse_config(spec.args, environ={})
    assert (upstream.endpoint, upstream.region, upstream.bucket, upstream.prefix) == (
        "https://s3.eu-west-1.amazonaws.com", "eu-west-1", "shared-bucket", "squall/prod/")
    assert (upstream.part_size, upstream.read_timeout) == (16 * 1024 * 1024, 120.0)
    data = {k: base64.b64decode(v).decode() for k, v in one(resources, "Secret")["data"].items()}
    assert data["upstream-access-key"] == "UPSTREAMACCESSKEY"
    assert data["upstream-secret-key"] == "upstream/secret+key"
    assert data["access-key"] == "SQUALLACCESSKEY"


def test_service_monitor_and_disruption_budget(renderings: Path) -> None:
    default = manifests(renderings, "default")
    assert not {"ServiceMonitor", "PodDisruptionBudget"} & {kind for kind, _ in default}
    resources = manifests(renderings, "cluster")
    sts = gateway_set(resources)
    pod_labels = sts["spec"]["template"]["metadata"]["labels"]
    pdb = resources[("PodDisruptionBudget", sts["metadata"]["name"])]["spec"]
    assert pdb["maxUnavailable"] == 1
    assert pdb["selector"]["matchLabels"].items() <= pod_labels.items()
    # No schema checks the ServiceMonitor (a CRD), so its shape is checked here.
    monitor = one(resources, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    headless = resources[("Service", sts["spec"]["serviceName"])]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= \
        headless["metadata"]["labels"].items()
    assert [n for (k, n), r in resources.items() if k == "Service" and matches(
        monitor["spec"]["selector"]["matchLabels"], r["metadata"]["labels"])] == [
        headless["metadata"]["name"]]  # not etcd's
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    secret = one(resources, "Secret")["metadata"]["name"]
    assert monitor["spec"]["endpoints"] == [
        {"port": "http", "path": "/_squall/metrics", "interval": "30s", "scrapeTimeout": "10s",
         "authorization": {"type": "Bearer",
                           "credentials": {"name": secret, "key": "status-token"}}}]
    assert [p["name"] for p in headless["spec"]["ports"]] == ["http"]


def load_settings_from(text: str, folder: Path) -> Settings:
    """Squall's own settings loader on a rendered config file."""
    path = folder / "squall.toml"
    path.write_text(text)
    return load_settings(path)


@pytest.fixture
def no_squall_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("SQUALL_"):
            monkeypatch.delenv(name)
    yield


@pytest.mark.usefixtures("no_squall_env")
@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_rendered_config_files_are_valid_squall_settings(
        renderings: Path, value_set: str, tmp_path: Path) -> None:
    settings = load_settings_from(config_file(manifests(renderings, value_set)), tmp_path)
    assert settings.listen == "0.0.0.0:9000"
    if value_set == "single":
        assert (settings.region, settings.domain, settings.log_level) == (
            "eu-west-1", "s3.example.test", "debug")
        assert (settings.access_log, settings.flush_concurrency, settings.inactivity_delay,
                settings.utilization_threshold, settings.backend_iops) == (
            False, 8, 15.5, 0.25, 500.0)
        assert (settings.cache_size, settings.backend_bandwidth) == (4 * 2**30, 200 * 2**20)
        assert settings.cache_dir is None  # no separate cache volume: <data_dir>/cache


@pytest.mark.usefixtures("no_squall_env")
def test_rendered_config_and_secret_start_a_gateway(renderings: Path, tmp_path: Path) -> None:
    """What a pod runs: the config file and credentials of the default rendering (the
    listen address, data and cache directories and backend root moved to loopback and
    tmp_path); the probes' path answers, clients sign with the Secret's keys, SIGTERM
    ends the gateway with status 0."""
    resources = manifests(renderings, "default")
    (tmp_path / "squall.toml").write_text(config_file(resources))
    keys = {k: base64.b64decode(v).decode() for k, v in one(resources, "Secret")["data"].items()}
    server = SquallProcess(
        tmp_path / "data",
        ["--config", str(tmp_path / "squall.toml"), "--cache-dir", str(tmp_path / "cache"),
         "--backend", f"posix:{tmp_path / 'objects'}"],
        env={"SQUALL_ACCESS_KEY": keys["access-key"], "SQUALL_SECRET_KEY": keys["secret-key"],
             "SQUALL_STATUS_TOKEN": keys["status-token"]},
        public_status=False,
    ).start()
    scrape = {"Authorization": f"Bearer {keys['status-token']}"}  # as the ServiceMonitor
    try:
        probe = container(resources)["readinessProbe"]["httpGet"]["path"]
        assert httpx.get(server.endpoint + probe, timeout=10).status_code == 200
        assert httpx.get(server.endpoint + "/_squall/metrics", timeout=10).status_code == 403
        metrics = httpx.get(server.endpoint + "/_squall/metrics", headers=scrape, timeout=10)
        assert metrics.status_code == 200
        s3 = boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1",
                          aws_access_key_id=keys["access-key"],
                          aws_secret_access_key=keys["secret-key"],
                          config=Config(retries={"max_attempts": 1},
                                        s3={"addressing_style": "path"}))
        s3.create_bucket(Bucket="helm")
        s3.put_object(Bucket="helm", Key="k", Body=b"rendered")
        assert s3.get_object(Bucket="helm", Key="k")["Body"].read() == b"rendered"
        status = httpx.get(server.endpoint + "/_squall/status", headers=scrape,
                           timeout=10).json()
        assert status["cache"] is True
    finally:
        assert server.stop() == 0, server.log()


@pytest.mark.usefixtures("no_squall_env")
def test_rendered_members_register_and_the_prestop_hook_leaves(
        renderings: Path, tmp_path: Path, etcd: EtcdServer) -> None:
    """Two pods of the cluster rendering as processes: the rendered config file and
    environment (their etcd replaced by a real one on loopback, their DNS names by loopback
    ports, a key prefix of this test's own), then the rendered preStop hook of pod 1 run
    by `sh` with the pod's environment: it leaves, pod 0 serves alone, pod 1 stops with 0."""
    resources = manifests(renderings, "cluster")
    name = gateway_set(resources)["metadata"]["name"]
    (tmp_path / "squall.toml").write_text(config_file(resources))
    prefix = f"/squall-helm-{uuid.uuid4().hex[:12]}/"
    ports = [free_port(), free_port()]
    pods = []
    for ordinal, port in enumerate(ports):
        env = pod_env(resources, f"{name}-{ordinal}")
        advertised = env["SQUALL_ADVERTISE_URL"]
        assert advertised.startswith(f"http://{name}-{ordinal}.") and advertised.endswith(":9000")
        env |= {"SQUALL_ADVERTISE_URL": f"http://127.0.0.1:{port}",
                "SQUALL_COORDINATOR": etcd.url, "SQUALL_COORDINATOR_PREFIX": prefix}
        pods.append((env, SquallProcess(
            tmp_path / f"pod{ordinal}",
            ["--config", str(tmp_path / "squall.toml"), "--cache-dir",
             str(tmp_path / f"cache{ordinal}"), "--backend", f"posix:{tmp_path / 'shared'}"],
            env={k: v for k, v in env.items() if k.startswith("SQUALL_")}, port=port,
            public_status=False)))
    token = {"Authorization": f"Bearer {pods[0][0]['SQUALL_STATUS_TOKEN']}"}

    def members(pod: SquallProcess) -> list[str]:
        view = httpx.get(pod.endpoint + "/_squall/cluster", headers=token, timeout=10).json()
        return sorted(m["url"] for m in view["members"]) if view["serving"] else []

    def wait_for(pod: SquallProcess, wanted: list[str]) -> None:
        deadline = time.monotonic() + 30
        while (seen := members(pod)) != wanted:
            assert time.monotonic() < deadline, (seen, pod.log())
            time.sleep(0.1)

    for _, pod in pods:
        pod.start()
    try:
        urls = sorted(pod.endpoint for _, pod in pods)
        wait_for(pods[0][1], urls)
        wait_for(pods[1][1], urls)
        env, leaving = pods[1]
        script = container(resources)["lifecycle"]["preStop"]["exec"]["command"][2]
        script = script.replace("http://127.0.0.1:9000", leaving.endpoint)
        script = re.sub(r"sleep \d+", "sleep 0", script)
        hook = subprocess.run(
            ["sh", "-c", script], capture_output=True, text=True, timeout=120, check=False,
            env={**env, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"})
        assert hook.returncode == 0, (hook.stdout, hook.stderr, leaving.log())
        assert "left the cluster" in hook.stdout
        wait_for(pods[0][1], [pods[0][1].endpoint])
    finally:
        codes = [pod.stop() for _, pod in reversed(pods)]
    assert codes == [0, 0], [pod.log() for _, pod in pods]


@pytest.mark.parametrize(("values", "message"), [
    (["--set", "replicaCount=3"],
     "backend.posix.existingClaim is required when replicaCount > 1"),
    (["--set", "backend.type=s3"], "backend.s3.endpoint is required"),
    (["--set", "backend.type=custom"], "backend.spec is required"),
    (["--set", "config.listen=0.0.0.0:1"], "config.listen is set by the chart"),
    (["--set", "config.cache_volumes[0].path=/x"], "config.cache_volumes: the chart writes"),
    (["--set", "podAntiAffinityPreset=always"], "podAntiAffinityPreset"),
    (["--set", "replicaCount=0"], "replicaCount"),
    (["--set", "backend.type=nfs"], "backend/type"),
    (["--set", "backend.s3.endpoint=s3.example.com/path"], "backend/s3/endpoint"),
    (["--set", "replicas=3"], "additional properties 'replicas' not allowed"),
    (["--set", "config.durability=sometimes"], "config/durability"),
    (["--set", "liveMembership.enabled=true"],
     "additional properties 'liveMembership' not allowed"),
    (["--set", "config.peers=http://a:9000"],
     "config.peers: the chart's pods coordinate through etcd"),
    (["--set", "config.node_id=0"], "config.node_id: the chart's pods coordinate"),
    (["--set", "config.lease_ttl=10"], "config.lease_ttl is set by the chart"),
    (["--set", "config.coordinator=etcd://x:2379"], "config.coordinator is set by the chart"),
    (["--set", "config.tls_cert=/tls/cert.pem"], "config.tls_cert: the chart serves plain HTTP"),
    (["--set", "replicaCount=2,backend.type=s3,backend.s3.endpoint=http://s3:9000",
      "--set", "etcd.enabled=false"], "replicaCount > 1 needs etcd to coordinate the pods"),
    (["--set", "coordinator.endpoints={etcd:2379}"],
     "coordinator.endpoints names an external etcd: set etcd.enabled=false"),
    (["--set", "coordinator.endpoints={etcd:2379},etcd.enabled=false"],
     "coordinator.endpoints needs a shared backend"),
    (["--set", "backend.type=s3,backend.s3.endpoint=http://s3:9000",
      "--set", "coordinator.user=squall,coordinator.password=pw"],
     "apply to an external etcd (etcd.enabled=false, coordinator.endpoints)"),
    (["--set", "backend.type=s3,backend.s3.endpoint=http://s3:9000,etcd.enabled=false",
      "--set", "coordinator.endpoints={etcd:2379},coordinator.user=squall"],
     "coordinator.user needs a password"),
    (["--set", "backend.type=s3,backend.s3.endpoint=http://s3:9000,etcd.enabled=false",
      "--set", "coordinator.endpoints={etcd:2379},coordinator.password=pw"],
     "needs coordinator.user"),
    (["--set", "backend.type=s3,backend.s3.endpoint=http://s3:9000,etcd.enabled=false",
      "--set", "coordinator.endpoints={etcd:2379},coordinator.tls.existingSecret=certs"],
     "coordinator.tls.existingSecret needs coordinator.tls.enabled=true"),
    (["--set", "backend.type=s3,backend.s3.endpoint=http://s3:9000,etcd.enabled=false",
      "--set", "coordinator.endpoints={etcd:2379},coordinator.tls.enabled=true",
      "--set", "coordinator.tls.existingSecret=certs,coordinator.tls.secretKeys.key="],
     "coordinator.tls.secretKeys.cert and coordinator.tls.secretKeys.key go together"),
    (["--set", "backend.type=s3,backend.s3.endpoint=http://s3:9000",
      "--set", "terminationGracePeriodSeconds=64"],
     ("terminationGracePeriodSeconds (64) must leave the hand-over of a leaving pod at least "
      "30 s: at least preStopSleepSeconds + 60 (65)")),
    (["--set", "etcd.replicaCount=4"], "etcd/replicaCount"),
    (["--set", "etcd.podAntiAffinityPreset=always"], "etcd/podAntiAffinityPreset"),
    (["--set", "coordinator.leaseTTL=1"], "coordinator/leaseTTL"),
    (["--set", "coordinator.prefix=squall"], "coordinator/prefix"),
    (["--set", "coordinator.endpoints={http://etcd:2379}"], "coordinator/endpoints/0"),
    (["--set", "dirtyReplicas=0"], "dirtyReplicas"),
])
def test_bad_values_are_refused_with_a_clear_message(
        tools: dict[str, str], values: list[str], message: str) -> None:
    proc = subprocess.run(
        [tools["helm"], "template", "squall", str(CHART), "--kube-version",
         KUBE_VERSIONS[-1], *values], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0, proc.stdout
    assert message in proc.stderr, proc.stderr


# Values whose content is passed to Kubernetes as it is (their defaults need no comment
# each: the value itself is commented).
FREE_FORM = {"resources", "podSecurityContext", "securityContext", "updateStrategy"}


def test_every_value_is_commented() -> None:
    """Each key of values.yaml is preceded by a comment line (free-form objects aside)."""
    missing, stack = [], []  # stack: (indentation, key) of the enclosing keys
    lines = (CHART / "values.yaml").read_text().splitlines()
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "-")) or ":" not in stripped:
            continue
        indent, key = len(line) - len(line.lstrip()), stripped.split(":", 1)[0]
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if not FREE_FORM & {k for _, k in stack} and not lines[number - 2].strip().startswith("#"):
            missing.append(f"values.yaml:{number}: {key}")
        stack.append((indent, key))
    assert not missing, "values without a comment:\n" + "\n".join(missing)
