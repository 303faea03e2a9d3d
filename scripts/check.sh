#!/usr/bin/env bash
# The fast checks CI runs before the test suite: ruff (the rules in pyproject.toml) over
# the whole tree, then mypy --strict (pyproject.toml [tool.mypy]).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup.sh
. scripts/setup.sh
echo "ruff check" >&2
ruff check .
echo "mypy" >&2
mypy gateway backends loadtests
