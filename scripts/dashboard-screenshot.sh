#!/usr/bin/env bash
# Regenerates docs/images/dashboard.png: the headless-Chromium dashboard test against a
# real gateway during a burst, saving its final screenshot (needs chromium and
# chromium-driver, see scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p docs/images
SQUALL_DASHBOARD_SCREENSHOT="$PWD/docs/images/dashboard.png" \
  "${SQUALL_VENV:-.venv}/bin/python" -m pytest -q -p no:cacheprovider \
  tests/gateway/dashboard/test_browser_e2e.py
echo "wrote docs/images/dashboard.png"
