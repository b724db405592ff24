#!/usr/bin/env bash
# Checks, builds and tests the whole workspace: formatting (rustfmt), lints (clippy, warnings are
# errors), installs the test dependencies, builds (debug), tests. Stops at the first failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

for tool in fmt clippy; do
    cargo "$tool" --version >/dev/null 2>&1 || {
        echo "test.sh: cargo $tool is missing: rustup component add rustfmt clippy" >&2
        exit 1
    }
done

echo "== cargo fmt --all -- --check"
cargo fmt --all -- --check

echo "== cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
# The measurement build (src/phases.rs) is linted too, so that it still builds when it is needed.
echo "== cargo clippy -p sharecheck --features phase-times -- -D warnings"
cargo clippy -p sharecheck --features phase-times -- -D warnings

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
[[ $status == 0 ]] || exit "$status"

# The README's Slurm recipe with a real one-node Slurm (root only; CI fails without it).
echo "== tests/slurm.sh"
tests/slurm.sh target/debug/sharecheck
