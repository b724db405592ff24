#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian 12 machine (run as root; CI runs it too).
# Idempotent: each step is skipped when its result is already there.
#
#   - Debian packages: libamdhip64-dev (HIP 5.2 headers in /usr/include/hip), gcc, g++, bsdutils
#     (`script`: the report's progress bar is tested on a terminal), slurm-wlm and munge
#     (tests/slurm.sh starts a one-node Slurm to run the README's recipe for many hosts);
#   - CUDA 13.5 headers and the real libcudart.so.13, from the pinned PyPI wheel
#     nvidia-cuda-runtime, unpacked into .deps/cuda at the repository root:
#       .deps/cuda/nvidia/cu13/include/cuda.h
#       .deps/cuda/nvidia/cu13/lib/libcudart.so.13
set -euo pipefail

CUDA_RUNTIME_VERSION=13.5.37

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
deps="$root/.deps"
cuda_dir="$deps/cuda"
cuda_h="$cuda_dir/nvidia/cu13/include/cuda.h"
cudart="$cuda_dir/nvidia/cu13/lib/libcudart.so.13"
stamp="$cuda_dir/.version"

say() { echo "fetch-deps: $*"; }
die() { echo "fetch-deps: error: $*" >&2; exit 1; }

# --- Debian packages ---------------------------------------------------------------------------
apt_packages=(libamdhip64-dev gcc g++ bsdutils slurm-wlm munge)
missing=()
for p in "${apt_packages[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# pip is needed for the CUDA wheel below; Debian's python3-pip only where no pip is usable.
if ! python3 -m pip --version >/dev/null 2>&1 && ! [ -f "$cuda_h" ]; then
    missing+=(python3-pip)
fi
if [ "${#missing[@]}" -eq 0 ]; then
    say "apt: ${apt_packages[*]} already installed, skipped"
else
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install ${missing[*]} by hand"
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "not root and no sudo: cannot install ${missing[*]}"
        sudo=(sudo)
    fi
    say "apt: installing ${missing[*]}"
    "${sudo[@]}" apt-get update -q || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q "${missing[@]}" \
        || die "apt-get install ${missing[*]} failed"
fi
[ -f /usr/include/hip/hip_runtime_api.h ] \
    || die "/usr/include/hip/hip_runtime_api.h missing although libamdhip64-dev is installed"

# --- CUDA headers and libcudart from the PyPI wheel --------------------------------------------
if [ -f "$cuda_h" ] && [ -e "$cudart" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$CUDA_RUNTIME_VERSION" ]; then
    say "cuda: nvidia-cuda-runtime $CUDA_RUNTIME_VERSION already in $cuda_dir, skipped"
else
    command -v python3 >/dev/null 2>&1 || die "python3 not found (needed to download the CUDA wheel)"
    python3 -m pip --version >/dev/null 2>&1 \
        || die "pip for python3 not found: install it (apt-get install -y python3-pip)"
    command -v unzip >/dev/null 2>&1 || python3 -c 'import zipfile' \
        || die "neither unzip nor python3's zipfile available"
    mkdir -p "$deps"
    tmp="$(mktemp -d "$deps/.fetch.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    say "cuda: downloading nvidia-cuda-runtime==$CUDA_RUNTIME_VERSION"
    python3 -m pip download --quiet --no-deps --disable-pip-version-check \
        "nvidia-cuda-runtime==$CUDA_RUNTIME_VERSION" -d "$tmp/whl" \
        || die "pip download nvidia-cuda-runtime==$CUDA_RUNTIME_VERSION failed"
    whl="$(find "$tmp/whl" -maxdepth 1 -name 'nvidia_cuda_runtime-*.whl' | head -n 1)"
    [ -n "$whl" ] || die "pip download produced no nvidia_cuda_runtime wheel in $tmp/whl"
    say "cuda: unpacking $(basename "$whl")"
    mkdir -p "$tmp/unpacked"
    if command -v unzip >/dev/null 2>&1; then
        unzip -q "$whl" -d "$tmp/unpacked" || die "unzip $whl failed"
    else
        python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
            "$whl" "$tmp/unpacked" || die "extracting $whl failed"
    fi
    [ -f "$tmp/unpacked/nvidia/cu13/include/cuda.h" ] \
        || die "the wheel has no nvidia/cu13/include/cuda.h (layout changed?)"
    [ -e "$tmp/unpacked/nvidia/cu13/lib/libcudart.so.13" ] \
        || die "the wheel has no nvidia/cu13/lib/libcudart.so.13 (layout changed?)"
    echo "$CUDA_RUNTIME_VERSION" > "$tmp/unpacked/.version"
    rm -rf "$cuda_dir"
    mv "$tmp/unpacked" "$cuda_dir"
    say "cuda: installed into $cuda_dir"
fi
say "cuda headers: $(dirname "$cuda_h")"
say "cudart: $cudart"
say "hip headers: /usr/include/hip"
