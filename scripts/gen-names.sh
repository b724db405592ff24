#!/usr/bin/env bash
# Regenerates core/src/names.rs from CUDA's cuda.h and HIP's hip_runtime_api.h.
# Usage: scripts/gen-names.sh CUDA_INCLUDE_DIR [HIP_INCLUDE_DIR]
set -euo pipefail
cuda_h="$1/cuda.h"
hip_h="${2:-/usr/include}/hip/hip_runtime_api.h"
out="$(dirname "$0")/../core/src/names.rs"
pairs() { tr '\n' ' ' | grep -oE "$1[A-Za-z_0-9]+\s*=\s*[0-9]+" | sed -E "s/\s*($1[A-Za-z_0-9]+)\s*=\s*([0-9]+)/\2 \1/" | awk '!seen[$1]++ {printf "        %s => \"%s\",\n", $1, $2}'; }
{
echo '//! Result-code names (generated from CUDA 13.5 `cuda.h` and HIP `hip_runtime_api.h`; regenerate with scripts/gen-names.sh).'
echo
echo '/// Name of a `CUresult` value, or `None` for a value the headers do not define.'
echo "pub fn cuda_result_name(code: i32) -> Option<&'static str> {"
echo '    Some(match code {'
awk '/typedef enum cudaError_enum/,/} CUresult;/' "$cuda_h" | pairs CUDA_
echo '        _ => return None,'
echo '    })'
echo '}'
echo
echo '/// Name of a `hipError_t` value (the first name the header gives it), or `None`.'
echo "pub fn hip_result_name(code: i32) -> Option<&'static str> {"
echo '    Some(match code {'
awk '/typedef enum __HIP_NODISCARD hipError_t|typedef enum hipError_t/,/} hipError_t;/' "$hip_h" | pairs hip
echo '        _ => return None,'
echo '    })'
echo '}'
} > "$out"
