#!/usr/bin/env bash
# Builds the release and lays out what is shipped, with the debug info split out of each binary:
#
#   target/dist/bin/sharecheck            target/dist/bin/sharecheck.debug
#   target/dist/lib/libsharecheck.so      target/dist/lib/libsharecheck.so.debug
#   target/dist/lib/libsharecheck_sim.so  target/dist/lib/libsharecheck_sim.so.debug
#   target/dist/lib/libsharecheck_sim_hip.so  target/dist/lib/libsharecheck_sim_hip.so.debug
#
# (`sharecheck run` finds ../lib/libsharecheck.so, and the simulated driver next to it.) Each
# binary keeps its symbol table and gets a .gnu_debuglink naming its .debug file: gdb and
# addr2line read file and line from it when it lies next to the binary (or under
# /usr/lib/debug). Ship the .debug files separately, or not at all.
#
# Why not `split-debuginfo = "packed"` in the profile: it moves only our own crates' DWARF into a
# .dwp; std's debug info and the line tables stay in the library (6.2 MB instead of 1.3 MB).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

for tool in objcopy nm addr2line; do
    command -v "$tool" >/dev/null 2>&1 || { echo "dist: $tool not found (binutils)" >&2; exit 1; }
done

cargo build --release --workspace
release="${CARGO_TARGET_DIR:-target}/release"
dist="${CARGO_TARGET_DIR:-target}/dist"
rm -rf "$dist"
mkdir -p "$dist/bin" "$dist/lib"

# split SRC DST: DST without debug info, DST.debug with it (compressed).
split() {
    cp "$1" "$2"
    objcopy --only-keep-debug --compress-debug-sections=zlib "$2" "$2.debug"
    chmod a-x "$2.debug"
    objcopy --strip-debug --add-gnu-debuglink="$2.debug" "$2"
}
split "$release/sharecheck" "$dist/bin/sharecheck"
split "$release/libsharecheck.so" "$dist/lib/libsharecheck.so"
split "$release/libsharecheck_sim.so" "$dist/lib/libsharecheck_sim.so"
split "$release/libsharecheck_sim_hip.so" "$dist/lib/libsharecheck_sim_hip.so"

# The split must still give file:line for an exported wrapper.
lib="$dist/lib/libsharecheck.so"
addr="$(nm -D --defined-only "$lib" | awk '$3 == "cuCtxEnablePeerAccess" { print $1 }')"
line="$(addr2line -e "$lib" "0x$addr")"
case "$line" in
    *.rs:[0-9]*) ;;
    *) echo "dist: addr2line cannot find cuCtxEnablePeerAccess's line through $lib.debug: $line" >&2
       exit 1 ;;
esac

echo "dist: $dist (cuCtxEnablePeerAccess is at $line)"
ls -l "$dist/bin" "$dist/lib"
