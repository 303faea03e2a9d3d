#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh Debian machine, then runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(fuse3 rsync fio bonnie++ openmpi-bin libopenmpi-dev s3fs chromium chromium-driver)
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
python -m pip install -q --disable-pip-version-check -e '.[test]'
# --quick: the quick tier (tests/conftest.py SLOW_PATHS and tests marked slow left out).
if [ "${1:-}" = "--quick" ]; then
  shift
  set -- -m "not slow" "$@"
fi
exec python -m pytest -q -p no:cacheprovider "$@"
