#!/usr/bin/env bash
# How many calls the shim itself makes into the real driver per covered call, once warm (issue
# 24), on a GPU: tests/c/steady.c's cases run under SHIM with the driver behind a counting layer
# (scripts/gpu/count_driver_calls.c, named by SHARECHECK_CUDA_LIBRARY), each twice, repeating the
# call 8 and 1008 times; the difference over 1000 is the steady state. tests/steady_state.rs
# states the same counts on the simulator. Needs 2 GPUs (the copies), gcc, CUDA headers.
# Usage: SHIM=target/release/libsharecheck.so scripts/gpu/steady.sh
# (LIBCUDA_DIR: where libcuda.so.1 is, when the linker cannot find it by itself.)
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
W=${TMPDIR:-/tmp}/sharecheck-steady; rm -rf "$W"; mkdir -p "$W"
CUDA_INC=${CUDA_INC:-/usr/local/cuda/include}
L=${LIBCUDA_DIR:+-L$LIBCUDA_DIR}
# Every other function of libcuda.so.1: a jump through a pointer resolved at load.
LIBCUDA=$(gcc -print-file-name=libcuda.so.1 $L 2>/dev/null)
[ -e "$LIBCUDA" ] || LIBCUDA=$(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}')
[ -n "${LIBCUDA_DIR:-}" ] && LIBCUDA="$LIBCUDA_DIR/libcuda.so.1"
COUNTED=$(grep -o '"cu[A-Za-z0-9_]*"' scripts/gpu/count_driver_calls.c | tr -d '"' | sort -u)
nm -D --defined-only "$LIBCUDA" | awk '$2=="T"{print $3}' | grep '^cu' | sort -u | grep -vxF "$COUNTED" > "$W/stubs.txt"
python3 - "$W/stubs.txt" > "$W/stubs.c" <<'PY'
import sys
names = open(sys.argv[1]).read().split()
print("#define _GNU_SOURCE\n#include <dlfcn.h>\nvoid *count_driver_libcuda(void);")
for n in names:
    print(f"__attribute__((visibility(\"hidden\"))) void *count_stub_{n};")
print("__attribute__((constructor)) static void count_stubs_resolve(void) {\n    void *h = count_driver_libcuda();")
for n in names:
    print(f'    count_stub_{n} = dlsym(h, "{n}");')
print("}")
print("__asm__(\n\".text\\n\"")
for n in names:
    print(f'    ".globl {n}\\n.type {n},@function\\n{n}: jmp *count_stub_{n}(%rip)\\n"')
print(");")
PY
gcc -shared -fPIC -O2 -o "$W/libcount_driver.so" scripts/gpu/count_driver_calls.c "$W/stubs.c" -ldl || exit 1
gcc -std=gnu11 -O1 -o "$W/steady" tests/c/steady.c -I"$CUDA_INC" -Iinclude -Itests/c $L -l:libcuda.so.1 || exit 1
for case in can-access:cuDeviceCanAccessPeer copy-stream0:cuMemcpyPeerAsync \
    copy-own-stream:cuMemcpyPeerAsync copy-sync:cuMemcpyPeer attach:cuStreamAttachMemAsync \
    ipc-get:cuIpcGetMemHandle ipc-get-event:cuIpcGetEventHandle dtod:cuMemcpyDtoDAsync_v2 \
    memset:cuMemsetD8Async alloc-free:cuMemAlloc_v2+cuMemFree_v2 \
    disable-enable:cuCtxDisablePeerAccess+cuCtxEnablePeerAccess \
    vmm-create-release:cuMemCreate+cuMemRelease vmm-reserve-free:cuMemAddressReserve+cuMemAddressFree \
    vmm-map-unmap:cuMemMap+cuMemUnmap vmm-retain-release:cuMemRetainAllocationHandle+cuMemRelease \
    vmm-set-access:cuMemSetAccess vmm-export:cuMemExportToShareableHandle \
    pool-alloc-free:cuMemAllocFromPoolAsync+cuMemFreeAsync \
    pool-alloc-default:cuMemAllocAsync+cuMemFreeAsync pool-export-pointer:cuMemPoolExportPointer; do
  c=${case%%:*}; f=${case#*:}
  for n in 8 1008; do
    rm -f "$W/$c.$n"
    COUNT_DRIVER_CALLS_OUT="$W/$c.$n" SHARECHECK_CUDA_LIBRARY="$W/libcount_driver.so" \
      LD_PRELOAD="$SHIM" "$W/steady" "$c" "$n" > "$W/$c.$n.out" 2> "$W/$c.$n.err" \
      || { echo "$c $n: failed: $(head -c 300 "$W/$c.$n.err")"; continue 2; }
  done
  per_call=$(python3 - "$W/$c.8" "$W/$c.1008" "$f" <<'PY'
import sys
# The case's own functions (a pair: A+B), when counted here, are also the shim's forwards of
# them: one a call each.
own = set(sys.argv[3].split("+"))
def read(p):
    d = {}
    for l in open(p):
        _, name, n = l.split()
        d[name] = int(n)
    return d
a, b = read(sys.argv[1]), read(sys.argv[2])
per = {k: (b.get(k, 0) - a.get(k, 0)) / 1000 - (k in own) for k in set(a) | set(b)}
print(" ".join(f"{k}={v:g}" for k, v in sorted(per.items()) if v) or "none")
PY
)
  echo "STEADY $c: $per_call"
done
