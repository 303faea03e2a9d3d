#!/usr/bin/env bash
# Installs the MinIO server the s3 backend's tests and the distributed MinIO launcher run
# (tests/backends/s3, python -m loadtests.minio): the version pinned in
# loadtests/minio/install.py, built with `go install` into $(go env GOPATH)/bin (or $GOBIN).
# Needs the checkout's virtual environment active (scripts/setup.sh runs it so) and Go
# >= 1.21, which fetches the Go toolchain MinIO asks for by itself. Does nothing when that
# version is installed already.
set -euo pipefail
cd "$(dirname "$0")/.."
read -r MODULE VERSION < <(python -c 'from loadtests.minio.install import MINIO_MODULE, MINIO_VERSION
print(MINIO_MODULE, MINIO_VERSION)')

GO=$(command -v go || true)
[ -n "$GO" ] || [ ! -x /usr/local/go/bin/go ] || GO=/usr/local/go/bin/go
if [ -z "$GO" ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q golang-go
  GO=$(command -v go)
fi
BIN=$("$GO" env GOBIN)
[ -n "$BIN" ] || BIN="$("$GO" env GOPATH)/bin"
if [ -x "$BIN/minio" ] && "$GO" version -m "$BIN/minio" 2>/dev/null \
     | grep -Eq "^[[:space:]]+mod[[:space:]]+$MODULE[[:space:]]+$VERSION([[:space:]]|$)"; then
  exit 0
fi
minor=$("$GO" env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
if [ "${minor:-0}" -lt 21 ] 2>/dev/null; then
  echo "install-minio: $("$GO" env GOVERSION) cannot fetch the Go toolchain MinIO needs;" \
       "install Go >= 1.21 (the MinIO tests are skipped meanwhile)" >&2
  exit 1
fi
echo "install-minio: go install $MODULE@$VERSION (a few minutes, once)" >&2
GOTOOLCHAIN=auto GOFLAGS=-buildvcs=false "$GO" install "$MODULE@$VERSION"
