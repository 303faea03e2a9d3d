#!/usr/bin/env bash
# Refreshes the lock files in requirements/ from pyproject.toml (run after changing a
# dependency; --upgrade moves every pin to the newest allowed version).
set -euo pipefail
cd "$(dirname "$0")/.."
# uv from the project's virtual environment (the check extra installs it), else from PATH.
uv=${SQUALL_VENV:-.venv}/bin/uv; [ -x "$uv" ] || uv=uv
UV=("$uv" pip compile -q --python-version 3.11 "$@")
"${UV[@]}" pyproject.toml --extra test -o requirements/test.lock
# The server's and the FUSE client's sets (the Dockerfile's) and the checks' set: parts of
# the test set, pinned to the versions the tests run with.
"${UV[@]}" pyproject.toml -c requirements/test.lock -o requirements/runtime.lock
"${UV[@]}" pyproject.toml --extra mount -c requirements/test.lock -o requirements/mount.lock
"${UV[@]}" pyproject.toml --extra check -c requirements/test.lock -o requirements/check.lock
