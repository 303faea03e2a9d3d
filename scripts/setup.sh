# Sourced by scripts/check.sh and scripts/test.sh: installs what the checks and the test
# suite need on a fresh Debian machine (the Debian packages, a virtual environment of the
# checkout's own with the locked Python packages, Squall itself) and activates it.
# etcd-server/etcd-client: the coordinator of the cluster tests; iproute2 and nftables: the
# network namespaces, links and cuts of the partition tests.
APT_PACKAGES=(fuse3 rsync fio bonnie++ openmpi-bin libopenmpi-dev s3fs chromium chromium-driver faketime xfsprogs
              etcd-server etcd-client iproute2 nftables)
# Debian's own Python makes virtual environments only with python3-venv installed.
"${PYTHON:-python3}" -c "import ensurepip" 2>/dev/null || APT_PACKAGES+=(python3-venv)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi

# A virtual environment of the checkout's own (Debian's system Python refuses
# `pip install` outside one); PYTHON picks the interpreter that creates it.
VENV=${SQUALL_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$VENV"
fi
# shellcheck disable=SC1091
. "$VENV/bin/activate"
# The locked versions (requirements/test.lock, refreshed by scripts/lock.sh), then Squall
# itself without resolving again.
python -m pip install -q --disable-pip-version-check -r requirements/test.lock
python -m pip install -q --disable-pip-version-check --no-deps -e .
# The MinIO server of the s3 backend's tests (pinned in loadtests/minio/install.py); those
# tests skip, naming the reason, where it could not be installed.
bash scripts/install-minio.sh || echo "setup: MinIO was not installed; the MinIO tests will be skipped" >&2
# helm and kubeconform for the chart's tests, installed here once rather than during the
# suite (scripts/check-helm.sh reuses them); where this fails the tests try again, or skip
# naming the reason.
bash scripts/check-helm.sh --install >/dev/null || echo "setup: helm and kubeconform were not installed; the chart tests will try again" >&2
