#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh Debian machine, then runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(fuse3 rsync fio bonnie++ openmpi-bin libopenmpi-dev s3fs)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi

PYTHON=${PYTHON:-python3}
"$PYTHON" -m pip install -q --disable-pip-version-check -e '.[test]'
exec "$PYTHON" -m pytest -q -p no:cacheprovider "$@"
