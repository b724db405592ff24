#!/usr/bin/env bash
# Builds and tests the whole workspace: installs the test dependencies, builds (debug), tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

echo "== scripts/fetch-deps.sh"
scripts/fetch-deps.sh

echo "== cargo build --workspace"
cargo build --workspace

echo "== cargo test --workspace"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace 2>&1 | tee "$log" || status=$?

echo "== test results"
grep -E '^(     Running|   Doc-tests|test result:)' "$log" || true
exit "$status"
