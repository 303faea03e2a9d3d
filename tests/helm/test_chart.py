"""The Helm chart (helm/squall).

scripts/check-helm.sh lints the chart, renders it with the default values and every value
set in helm/squall/ci/, and validates each rendering with kubeconform; these tests run it,
then check facts of the renderings that schemas cannot: the member list and node ids, the
probes, the volumes, the Secret wiring. The rendered config file and credentials also
start a real gateway. Without Go (so without helm) the tests are skipped, saying why.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
import yaml
from botocore.config import Config

from backends.s3.config import parse_config
from gateway.cluster.settings import cluster_settings
from gateway.settings import Settings, load_settings
from tests.support.server import SquallProcess

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
    spec = one(resources, "StatefulSet")["spec"]["template"]["spec"]
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
    assert {"default", "single", "cluster", "s3", "existing-secret"} <= set(VALUE_SETS)


@pytest.mark.parametrize("value_set", ["cluster", "s3"])
def test_three_pods_get_the_ordered_member_list_and_their_ordinal(
        renderings: Path, value_set: str) -> None:
    resources = manifests(renderings, value_set)
    sts = one(resources, "StatefulSet")
    name, headless = sts["metadata"]["name"], sts["spec"]["serviceName"]
    assert sts["spec"]["replicas"] == 3
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    port = container(resources)["ports"][0]["containerPort"]
    env = env_of(resources)
    assert env["SQUALL_PEERS"]["value"] == ",".join(
        f"http://{name}-{i}.{headless}.{NAMESPACE}.svc.cluster.local:{port}" for i in range(3))
    assert env["SQUALL_NODE_ID"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']"}}
    assert env["SQUALL_CLUSTER_SECRET"]["valueFrom"]["secretKeyRef"]["key"] == "cluster-secret"
    service = resources[("Service", headless)]["spec"]
    assert service["clusterIP"] == "None"
    assert service["publishNotReadyAddresses"] is True
    pod_labels = sts["spec"]["template"]["metadata"]["labels"]
    assert service["selector"].items() <= pod_labels.items()


def test_live_membership_reads_a_watched_member_file(
        tools: dict[str, str], renderings: Path, tmp_path: Path) -> None:
    """The member list is a ConfigMap of its own, mounted as a directory (updated in
    place by the kubelet) and outside the pods' checksum: a new list restarts no pod."""
    resources = manifests(renderings, "live")
    sts = one(resources, "StatefulSet")
    name, headless = sts["metadata"]["name"], sts["spec"]["serviceName"]
    env = env_of(resources)
    assert "SQUALL_PEERS" not in env
    assert env["SQUALL_PEERS_FILE"]["value"] == "/etc/squall-members/members"
    assert env["SQUALL_NODE_ID"]["valueFrom"]["fieldRef"]["fieldPath"].endswith("pod-index']")
    mount = next(m for m in container(resources)["volumeMounts"] if m["name"] == "members")
    assert mount == {"name": "members", "mountPath": "/etc/squall-members", "readOnly": True}
    volume = next(v for v in sts["spec"]["template"]["spec"]["volumes"]
                  if v["name"] == "members")
    listed = resources[("ConfigMap", volume["configMap"]["name"])]["data"]["members"]
    port = container(resources)["ports"][0]["containerPort"]
    urls = [f"http://{name}-{i}.{headless}.{NAMESPACE}.svc.cluster.local:{port}"
            for i in range(2)]  # liveMembership.members: 2 of the 3 pods
    assert listed.split() == urls and sts["spec"]["replicas"] == 3
    members = tmp_path / "members"
    members.write_text(listed)
    clustering = cluster_settings([], 1, "s" * 16, peers_file=members)
    assert clustering is not None and list(clustering.ring.members) == urls

    def render(*values: str) -> dict[tuple[str, str], dict[str, Any]]:
        proc = subprocess.run(
            [tools["helm"], "template", "squall", str(CHART), "--kube-version",
             KUBE_VERSIONS[-1], "--namespace", NAMESPACE, "-f",
             str(CHART / "ci" / "live-values.yaml"), *values],
            capture_output=True, text=True, timeout=120, check=True)
        return {(d["kind"], d["metadata"]["name"]): d
                for d in yaml.safe_load_all(proc.stdout) if d}

    two, three = render(), render("--set", "liveMembership.members=3")
    assert len(one_named(three, "-members")["data"]["members"].split()) == 3
    before, after = one(two, "StatefulSet")["spec"], one(three, "StatefulSet")["spec"]
    for spec in (before, after):  # (each rendering generates its own credentials)
        spec["template"]["metadata"]["annotations"].pop("checksum/secret")
    assert after == before  # no pod restarts


def one_named(resources: dict[tuple[str, str], dict[str, Any]], suffix: str) -> dict[str, Any]:
    (found,) = [r for (_, n), r in resources.items() if n.endswith(suffix)]
    return found


@pytest.mark.parametrize("value_set", ["default", "single"])
def test_one_pod_runs_without_a_member_list(renderings: Path, value_set: str) -> None:
    env = env_of(manifests(renderings, value_set))
    assert not {"SQUALL_PEERS", "SQUALL_NODE_ID", "SQUALL_CLUSTER_SECRET"} & env.keys()


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_probes_use_the_health_endpoint(renderings: Path, value_set: str) -> None:
    squall = container(manifests(renderings, value_set))
    assert [p["name"] for p in squall["ports"]] == ["http"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert squall[probe]["httpGet"] == {"path": HEALTH, "port": "http"}, probe
    assert squall["args"][:3] == ["serve", "--config", "/etc/squall/squall.toml"]


def test_default_pods_claim_a_data_and_a_cache_volume(renderings: Path) -> None:
    resources = manifests(renderings, "default")
    sts = one(resources, "StatefulSet")
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
    single = one(manifests(renderings, "single"), "StatefulSet")["spec"]
    (claim,) = single["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data" and claim["spec"]["storageClassName"] == ""
    scratch = manifests(renderings, "existing-secret")
    spec = one(scratch, "StatefulSet")["spec"]
    assert "volumeClaimTemplates" not in spec
    volumes = {v["name"]: v for v in spec["template"]["spec"]["volumes"]}
    assert volumes["data"] == {"name": "data", "emptyDir": {}}
    cluster = manifests(renderings, "cluster")
    volumes = {v["name"]: v for v in one(cluster, "StatefulSet")["spec"]["template"]["spec"]
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
    }
    sts = one(resources, "StatefulSet")
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
    sts = one(resources, "StatefulSet")
    pod_labels = sts["spec"]["template"]["metadata"]["labels"]
    pdb = one(resources, "PodDisruptionBudget")["spec"]
    assert pdb["maxUnavailable"] == 1
    assert pdb["selector"]["matchLabels"].items() <= pod_labels.items()
    # No schema checks the ServiceMonitor (a CRD), so its shape is checked here.
    monitor = one(resources, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    headless = resources[("Service", sts["spec"]["serviceName"])]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= \
        headless["metadata"]["labels"].items()
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
     "backend.posix.existingClaim is required with liveMembership.enabled"),
    (["--set", "liveMembership.enabled=true,liveMembership.members=2",
      "--set", "backend.posix.existingClaim=shared"],
     "liveMembership.members (2) cannot be above replicaCount (1)"),
    (["--set", "config.peers_file=/x"], "config.peers_file is set by the chart"),
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
