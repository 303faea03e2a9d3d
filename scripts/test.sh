#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh Debian machine, then runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup.sh
. scripts/setup.sh
# --quick: the quick tier (tests/conftest.py SLOW_PATHS and tests marked slow left out).
if [ "${1:-}" = "--quick" ]; then
  shift
  set -- -m "not slow" "$@"
fi
# The slowest tests are listed at the end: the suite stays well under 20 minutes.
exec python -m pytest -q -p no:cacheprovider --durations=15 "$@"
