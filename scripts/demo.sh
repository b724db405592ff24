#!/usr/bin/env bash
# The main job on any machine: builds sharecheck (release), builds the bundled demo program and
# runs it under `sharecheck run --sim` (the simulated two-GPU driver), then reviews the traces.
# On a machine with a GPU, drop --sim to run it on the real driver.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cargo build --release --workspace
out="target/demo"
rm -rf "$out" && mkdir -p "$out"
cc -O2 -Wall -Wextra -o "$out/peer_demo" scripts/demo/peer_demo.c -ldl

echo "== sharecheck run --sim -- peer_demo"
target/release/sharecheck run --sim --trace "$PWD/$out/traces/%p.jsonl" -- "$out/peer_demo"
echo
echo "== sharecheck report $out/traces"
target/release/sharecheck report "$out/traces"
