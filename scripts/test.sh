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
# Two pytest processes (SQUALL_TEST_PROCESSES; 0 runs in this one), each taking whole
# files: the tests wait on real servers, mounts and disks much of the time. The slowest
# tests are listed at the end: the suite stays well under 20 minutes.
exec python -m pytest -q -p no:cacheprovider -n "${SQUALL_TEST_PROCESSES:-2}" --dist loadfile \
    --durations=15 "$@"
