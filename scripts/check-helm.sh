#!/usr/bin/env bash
# Checks the Helm chart helm/squall: `helm lint --strict`, then `helm template` with the
# default values and every value set in helm/squall/ci/, each rendering validated by
# kubeconform (-strict) against the Kubernetes JSON schemas of the oldest Kubernetes the
# chart supports and of a current one.
#
# Tools are installed on first use under $SQUALL_TOOLS (default ~/.cache/squall-tools) and
# reused afterwards (a second run installs nothing):
#   helm, kubeconform  `go install` from the Go module proxy (Go: $SQUALL_GO, else the
#                      one on PATH, else /usr/local/go/bin/go)
#   JSON schemas       the PyPI package kubernetes-validate, which bundles them
#
# Usage: scripts/check-helm.sh            lint, render and validate (renderings are kept
#                                         in $SQUALL_HELM_OUT if set, and on failure)
#        scripts/check-helm.sh --install  install the tools and print their paths
# Exit status: 0 all good; 1 a check failed; 3 the tools cannot be installed (no Go).
set -euo pipefail
cd "$(dirname "$0")/.."

HELM_VERSION=v3.21.4
# Official helm builds stamp the Kubernetes version of their client-go (v0.36 = 1.36) as
# the default capabilities; `go install` needs it given, or helm assumes Kubernetes 1.20.
HELM_KUBE_MINOR=36
KUBECONFORM_VERSION=v0.8.0
SCHEMAS_PACKAGE=kubernetes-validate==1.37.0
# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and a current one.
KUBE_VERSIONS=(1.28.0 1.36.0)
CHART=helm/squall
# ServiceMonitor is a CRD (Prometheus Operator) without a schema here: tests/helm checks it.
SKIP_KINDS=ServiceMonitor

TOOLS=${SQUALL_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/squall-tools}
PYTHON=${PYTHON:-python3}
HELM=$TOOLS/helm-$HELM_VERSION/helm
KUBECONFORM=$TOOLS/kubeconform-$KUBECONFORM_VERSION/kubeconform
SCHEMAS=$TOOLS/schemas-${SCHEMAS_PACKAGE#*==}

log() { echo "check-helm: $*" >&2; }

find_go() {
  if [ -n "${SQUALL_GO:-}" ]; then [ -x "$SQUALL_GO" ] && echo "$SQUALL_GO"
  elif command -v go >/dev/null 2>&1; then command -v go
  elif [ -x /usr/local/go/bin/go ]; then echo /usr/local/go/bin/go
  else return 1
  fi
}

install_go_tool() {  # BINARY PACKAGE@VERSION [go install flags...]
  local binary=$1 package=$2
  shift 2
  [ -x "$binary" ] && return 0
  local go
  if ! go=$(find_go); then
    log "Go is not installed (not \$SQUALL_GO, on PATH or in /usr/local/go): cannot install $package"
    exit 3
  fi
  log "installing $package (go install)"
  local started=$SECONDS build
  # Private module and build caches (about 1 GiB for helm), removed once it is built.
  build=$(mktemp -d)
  GOBIN=$(dirname "$binary") GOMODCACHE=$build/mod GOCACHE=$build/cache CGO_ENABLED=0 \
    "$go" install -trimpath "$@" "$package"
  GOMODCACHE=$build/mod "$go" clean -modcache
  rm -rf "$build"
  log "installed $(basename "$binary") in $((SECONDS - started)) s"
}

install_schemas() {
  [ -f "$SCHEMAS/.complete" ] && return 0
  log "installing the Kubernetes JSON schemas ($SCHEMAS_PACKAGE from PyPI)"
  local download
  download=$(mktemp -d)
  "$PYTHON" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    -d "$download" "$SCHEMAS_PACKAGE"
  # kubernetes-validate's schemas point at their definitions by absolute URL
  # ($id https://kubernetes.io/api/..., $ref /api/_definitions.json); kubeconform must
  # find them next to each file instead.
  "$PYTHON" - "$download"/*.whl "$SCHEMAS" "${KUBE_VERSIONS[@]}" <<'PY'
import json, sys, zipfile
from pathlib import Path

wheel, target, versions = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
prefix = "kubernetes_validate/kubernetes-json-schema/"
with zipfile.ZipFile(wheel) as archive:
    for version in versions:
        for flavour in ("local", "local-strict"):
            folder = f"v{version}-{flavour}/"
            names = [n for n in archive.namelist() if n.startswith(prefix + folder)]
            if not names:
                sys.exit(f"{wheel} has no schemas for Kubernetes {version}")
            out = target / folder
            out.mkdir(parents=True, exist_ok=True)
            for name in names:
                schema = json.loads(archive.read(name))
                schema.pop("$id", None)
                text = json.dumps(schema).replace('"/api/_definitions.json#', '"_definitions.json#')
                (out / name[len(prefix + folder):]).write_text(text)
PY
  rm -rf "$download"
  touch "$SCHEMAS/.complete"
}

install_tools() {
  local k8s="-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1"
  k8s+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$HELM_KUBE_MINOR"
  k8s+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1"
  k8s+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$HELM_KUBE_MINOR"
  install_go_tool "$HELM" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION $k8s"
  install_go_tool "$KUBECONFORM" \
    "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION" -ldflags "-s -w"
  install_schemas
}

install_tools
if [ "${1:-}" = "--install" ]; then
  echo "helm=$HELM"
  echo "kubeconform=$KUBECONFORM"
  echo "schemas=$SCHEMAS"
  exit 0
fi

if [ -n "${SQUALL_HELM_OUT:-}" ]; then
  OUT=$SQUALL_HELM_OUT
  mkdir -p "$OUT"
else
  OUT=$(mktemp -d)
fi
location="$SCHEMAS/{{ .NormalizedKubernetesVersion }}-local{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json"
failed=0
value_sets=(default "$CHART"/ci/*-values.yaml)
for kube in "${KUBE_VERSIONS[@]}"; do
  for values in "${value_sets[@]}"; do
    name=$(basename "$values" -values.yaml)
    args=()
    [ "$values" = default ] || args=(--values "$values")
    rendering="$OUT/$name-$kube.yaml"
    echo "== $name, Kubernetes $kube"
    if ! "$HELM" lint --strict --quiet --kube-version "$kube" "${args[@]}" "$CHART"; then
      log "helm lint failed: $name, Kubernetes $kube"; failed=1; continue
    fi
    if ! "$HELM" template squall "$CHART" --namespace squall --kube-version "$kube" \
        "${args[@]}" > "$rendering"; then
      log "helm template failed: $name, Kubernetes $kube"; failed=1; continue
    fi
    if ! "$KUBECONFORM" -strict -summary -kubernetes-version "$kube" \
        -schema-location "$location" -skip "$SKIP_KINDS" "$rendering"; then
      log "kubeconform found invalid manifests: $rendering"; failed=1
    fi
  done
done
if [ "$failed" -ne 0 ]; then
  log "FAILED (renderings in $OUT)"
  exit 1
fi
log "chart OK: ${#value_sets[@]} value sets x ${#KUBE_VERSIONS[@]} Kubernetes versions"
[ -n "${SQUALL_HELM_OUT:-}" ] || rm -rf "$OUT"
