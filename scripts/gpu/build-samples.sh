#!/usr/bin/env bash
# Builds the three cuda-samples programs of issue 25 from a cuda-samples checkout, each in its own
# folder beside the kernel it loads at run time:
#   OUTDIR/vectorAddMMAP/vectorAddMMAP                 VMM across devices, one process
#   OUTDIR/memMapIPCDrv/memMapIPCDrv                   VMM handles across processes (POSIX fds)
#   OUTDIR/streamOrderedAllocationIPC/streamOrderedAllocationIPC   pools across processes
# Usage: scripts/gpu/build-samples.sh SAMPLES OUTDIR   (needs nvcc and g++; exits 1 on failure)
set -euo pipefail
C="$1/Common"; S="$1/Samples"; B="$2"
mkdir -p "$B/vectorAddMMAP" "$B/memMapIPCDrv" "$B/streamOrderedAllocationIPC"
nvcc -fatbin -Wno-deprecated-gpu-targets -o "$B/vectorAddMMAP/vectorAdd_kernel64.fatbin" \
    "$S/0_Introduction/vectorAddMMAP/vectorAdd_kernel.cu"
g++ -O2 -std=c++17 -I"$C" -I/usr/local/cuda/include -o "$B/vectorAddMMAP/vectorAddMMAP" \
    "$S/0_Introduction/vectorAddMMAP/vectorAddMMAP.cpp" \
    "$S/0_Introduction/vectorAddMMAP/multidevicealloc_memmap.cpp" -L/usr/local/cuda/lib64 -lcuda
nvcc -ptx -I"$C" -o "$B/memMapIPCDrv/memMapIpc_kernel64.ptx" \
    "$S/3_CUDA_Features/memMapIPCDrv/memMapIpc_kernel.cu"
g++ -O2 -std=c++17 -I"$C" -I/usr/local/cuda/include -o "$B/memMapIPCDrv/memMapIPCDrv" \
    "$S/3_CUDA_Features/memMapIPCDrv/memMapIpc.cpp" "$C/helper_multiprocess.cpp" \
    -L/usr/local/cuda/lib64 -lcuda -lrt
nvcc -O2 -std=c++17 -I"$C" -o "$B/streamOrderedAllocationIPC/streamOrderedAllocationIPC" \
    "$S/2_Concepts_and_Techniques/streamOrderedAllocationIPC/streamOrderedAllocationIPC.cu" \
    "$C/helper_multiprocess.cpp" -lcuda
