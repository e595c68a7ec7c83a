#!/usr/bin/env bash
# The GPU machine lacks the sqlite3, xxhash, curl and libpq development files and cannot download
# (../shared/MACHINES.md). Unpack Debian's packages into .deps (git-ignored) here; pass
# carry [".deps"] to the device's `run`, and tools/gpu_check.sh points cmake at them.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download libsqlite3-dev libxxhash-dev libcurl4-openssl-dev libpq-dev libpq5 libldap-2.5-0 libsasl2-2)
mkdir -p .deps
for deb in "$tmp"/*.deb; do dpkg -x "$deb" .deps; done
echo "unpacked into .deps: $(ls .deps/usr/include | tr '\n' ' ')"
