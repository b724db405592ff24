#!/usr/bin/env bash
# Installs sharecheck under PREFIX (default /usr/local): builds the release (scripts/dist.sh:
# debug info split out of each binary) and copies
#
#   PREFIX/bin/sharecheck
#   PREFIX/lib/libsharecheck.so        (+ .debug)   the shim, found by `sharecheck run` in ../lib
#   PREFIX/lib/libsharecheck_sim.so    (+ .debug)   the simulated driver, for `run --sim`
#   PREFIX/lib/libsharecheck_sim_hip.so (+ .debug)  the simulated HIP runtime, beside it
#   PREFIX/include/sharecheck.h                     for programs that link the shim
#
# Usage: scripts/install.sh [PREFIX]. Needs what dist.sh needs (Rust, binutils) and write access
# to PREFIX. Uninstall: remove those files.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
prefix="${1:-/usr/local}"
scripts/dist.sh > /dev/null
dist="${CARGO_TARGET_DIR:-target}/dist"
install -d "$prefix/bin" "$prefix/lib" "$prefix/include"
install -m 0755 "$dist/bin/sharecheck" "$prefix/bin/sharecheck"
install -m 0644 "$dist/bin/sharecheck.debug" "$prefix/bin/sharecheck.debug"
for lib in libsharecheck.so libsharecheck_sim.so libsharecheck_sim_hip.so; do
    install -m 0755 "$dist/lib/$lib" "$prefix/lib/$lib"
    install -m 0644 "$dist/lib/$lib.debug" "$prefix/lib/$lib.debug"
done
install -m 0644 include/sharecheck.h "$prefix/include/sharecheck.h"
"$prefix/bin/sharecheck" --version
echo "installed under $prefix; try: $prefix/bin/sharecheck run --sim -- PROG"
