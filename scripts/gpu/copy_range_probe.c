/* What the driver answers for peer copies whose range leaves the allocation the pointer is in, or
 * whose memory was freed: the measurements behind the copy-range rules (LD_PRELOAD.md, "Peer
 * copies at allocation edges, measured"). Two devices. Prints `FACT name value` lines.
 *   adjacent-alloc     cuMemAlloc allocations that happen to be adjacent: a copy across the edge
 *   vmm-adjacent-maps  two cuMemCreate allocations mapped side by side in one reservation: a copy
 *                      across the edge, and what cuMemGetAddressRange says of each mapping
 *   freed              a copy to and from memory freed with cuMemFree
 * Build: gcc -O1 -o copy_range_probe copy_range_probe.c -I/usr/local/cuda/include -lcuda */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#define MUST(x)                                                          \
    do {                                                                 \
        CUresult r_ = (x);                                               \
        if (r_ != CUDA_SUCCESS) {                                        \
            fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, r_); \
            exit(3);                                                     \
        }                                                                \
    } while (0)

static void fact(const char *name, long long v) { printf("FACT %s %lld\n", name, v); }

int main(void) {
    CUdevice d0, d1;
    CUcontext c0, c1;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&d0, 0));
    MUST(cuDeviceGet(&d1, 1));
    MUST(cuDevicePrimaryCtxRetain(&c0, d0));
    MUST(cuDevicePrimaryCtxRetain(&c1, d1));
    MUST(cuCtxSetCurrent(c1));
    const size_t S = 2 << 20, N = 8192;
    CUdeviceptr src;
    MUST(cuMemAlloc(&src, 2 * S));
    MUST(cuCtxSetCurrent(c0));

    /* cuMemAlloc: find two adjacent allocations among 64. */
    CUdeviceptr a[64];
    int found = -1, other = -1;
    for (int i = 0; i < 64; i++) MUST(cuMemAlloc(&a[i], S));
    for (int i = 0; i < 64 && found < 0; i++)
        for (int j = 0; j < 64; j++)
            if (a[i] + S == a[j]) { found = i; other = j; break; }
    fact("adjacent_alloc_found", found >= 0);
    if (found >= 0) {
        CUdeviceptr base = 0; size_t size = 0;
        MUST(cuMemGetAddressRange(&base, &size, a[found]));
        fact("adjacent_alloc_range_is_own", base == a[found] && size == S);
        fact("adjacent_alloc_copy_across_edge", cuMemcpyPeer(a[found] + S - N / 2, c0, src, c1, N));
        fact("adjacent_alloc_copy_within", cuMemcpyPeer(a[found] + S - N, c0, src, c1, N));
        fact("adjacent_alloc_copy_across_edge_as_source", cuMemcpyPeer(src, c1, a[found] + S - N / 2, c0, N));
        (void)other;
    }
    for (int i = 0; i < 64; i++) MUST(cuMemFree(a[i]));

    /* VMM: two allocations mapped side by side. */
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    MUST(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemGenericAllocationHandle h1, h2;
    MUST(cuMemCreate(&h1, gran, &prop, 0));
    MUST(cuMemCreate(&h2, gran, &prop, 0));
    CUdeviceptr va;
    MUST(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
    MUST(cuMemMap(va, gran, 0, h1, 0));
    MUST(cuMemMap(va + gran, gran, 0, h2, 0));
    CUmemAccessDesc acc = {0};
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = 0;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    MUST(cuMemSetAccess(va, 2 * gran, &acc, 1));
    CUdeviceptr base = 0; size_t size = 0;
    fact("vmm_range_rc", cuMemGetAddressRange(&base, &size, va + 16));
    fact("vmm_range_is_mapping", base == va && size == gran);
    fact("vmm_range_is_reservation", base == va && size == 2 * gran);
    fact("vmm_copy_across_maps", cuMemcpyPeer(va + gran - N / 2, c0, src, c1, N));
    fact("vmm_copy_within_map", cuMemcpyPeer(va + gran - N, c0, src, c1, N));
    MUST(cuMemUnmap(va, 2 * gran));
    MUST(cuMemAddressFree(va, 2 * gran));
    MUST(cuMemRelease(h1));
    MUST(cuMemRelease(h2));

    /* Freed memory. */
    CUdeviceptr gone;
    MUST(cuMemAlloc(&gone, S));
    MUST(cuMemFree(gone));
    fact("freed_copy_to", cuMemcpyPeer(gone, c0, src, c1, N));
    fact("freed_copy_from", cuMemcpyPeer(src, c1, gone, c0, N));
    base = 0; size = 0;
    fact("freed_range_rc", cuMemGetAddressRange(&base, &size, gone));
    MUST(cuCtxSetCurrent(c1));
    MUST(cuMemFree(src));
    return 0;
}
