/* What R580 answers to the VMM calls' misuses (issue 25), before the simulator models them.
 * No multicast object is created. Each line: "case<TAB>answer". Device 0, POSIX fd handles.
 * Build: gcc -O1 -o vmm_probe scripts/gpu/vmm_probe.c -I$CUDA_INC -l:libcuda.so.1
 * Usage: vmm_probe [calls | memset | fabric]   (memset: a copy and memset on memory never given
 * access, in a process of their own, in case the driver poisons the context; fabric: FABRIC
 * handles and what a create asks of IMEX). */
#include <cuda.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void say(const char *what, CUresult r) {
    const char *name = "?";
    cuGetErrorName(r, &name);
    printf("%s\t%d\t%s\n", what, (int)r, name);
    fflush(stdout);
}

static CUmemAllocationProp prop_of(int types) {
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = 0;
    p.requestedHandleTypes = (CUmemAllocationHandleType)types;
    return p;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "calls";
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) {
        fprintf(stderr, "no device\n");
        return 2;
    }
    CUmemAllocationProp fd_prop = prop_of(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CUmemAllocationProp plain_prop = prop_of(CU_MEM_HANDLE_TYPE_NONE);
    size_t g = 0, rec = 0;
    say("granularity.minimum", cuMemGetAllocationGranularity(&g, &fd_prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    say("granularity.recommended", cuMemGetAllocationGranularity(&rec, &fd_prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    printf("granularity\t%zu\t%zu\n", g, rec);
    if (!g)
        return 2;
    CUmemGenericAllocationHandle h = 0, h2 = 0, bad = 0;
    CUdeviceptr va = 0;
    CUmemAccessDesc rw;
    memset(&rw, 0, sizeof rw);
    rw.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    rw.location.id = 0;
    rw.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    say("create.ok", cuMemCreate(&h, 2 * g, &fd_prop, 0));
    say("reserve.ok", cuMemAddressReserve(&va, 4 * g, 0, 0, 0));
    if (!strcmp(mode, "fabric")) {
        /* FABRIC handles: what the device says, what a create asks of IMEX. */
        int fabric = -1;
        say("attribute.fabric-supported", cuDeviceGetAttribute(&fabric, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, dev));
        printf("fabric-supported\t%d\n", fabric);
        CUmemAllocationProp fab = prop_of(CU_MEM_HANDLE_TYPE_FABRIC);
        size_t fg = 0;
        say("granularity.fabric", cuMemGetAllocationGranularity(&fg, &fab, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        CUmemGenericAllocationHandle f = 0;
        CUresult r = cuMemCreate(&f, g, &fab, 0);
        say("create.fabric", r);
        if (r == CUDA_SUCCESS) {
            CUmemFabricHandle fh;
            say("export.fabric", cuMemExportToShareableHandle(&fh, f, CU_MEM_HANDLE_TYPE_FABRIC, 0));
            say("release.fabric", cuMemRelease(f));
        }
        CUmemAllocationProp both = prop_of(CU_MEM_HANDLE_TYPE_FABRIC | CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        r = cuMemCreate(&f, g, &both, 0);
        say("create.fabric-and-fd", r);
        if (r == CUDA_SUCCESS)
            say("release.fabric-and-fd", cuMemRelease(f));
        return 0;
    }
    if (!strcmp(mode, "memset")) {
        say("map.ok", cuMemMap(va, 2 * g, 0, h, 0));
        say("memsetD8.no-access", cuMemsetD8_v2(va, 1, 64));
        CUdeviceptr d = 0;
        cuMemAlloc_v2(&d, 64);
        say("memcpyDtoD.no-access", cuMemcpyDtoD_v2(d, va, 64));
        say("memsetD8Async.no-access", cuMemsetD8Async(va, 1, 64, 0));
        say("sync", cuCtxSynchronize());
        say("setAccess.ok", cuMemSetAccess(va, 2 * g, &rw, 1));
        say("memsetD8.after-access", cuMemsetD8_v2(va, 1, 64));
        say("sync", cuCtxSynchronize());
        return 0;
    }
    say("create.size-half-granule", cuMemCreate(&bad, g / 2, &fd_prop, 0));
    say("create.size-granule-plus-page", cuMemCreate(&bad, g + 4096, &fd_prop, 0));
    say("create.flags-1", cuMemCreate(&bad, g, &fd_prop, 1));
    say("map.ptr-not-granular", cuMemMap(va + 4096, g, 0, h, 0));
    say("map.size-not-granular", cuMemMap(va, g + 4096, 0, h, 0));
    say("map.offset-not-granular", cuMemMap(va, g, 4096, h, 0));
    say("map.offset-one-granule", cuMemMap(va + 3 * g, g, g, h, 0));
    say("unmap.offset-one-granule", cuMemUnmap(va + 3 * g, g));
    say("map.past-allocation", cuMemMap(va, 3 * g, 0, h, 0));
    say("map.offset-plus-size-past", cuMemMap(va, 2 * g, g, h, 0));
    say("map.past-reservation-end", cuMemMap(va + 3 * g, 2 * g, 0, h, 0));
    say("unmap.past-reservation-end", cuMemUnmap(va + 3 * g, 2 * g));
    say("map.outside-reservation", cuMemMap(va + 4 * g, g, 0, h, 0));
    say("map.released-handle-never-created", cuMemMap(va, g, 0, (CUmemGenericAllocationHandle)0, 0));
    say("map.part-of-allocation", cuMemMap(va, g, 0, h, 0));
    say("unmap.part-of-allocation", cuMemUnmap(va, g));
    say("map.ok", cuMemMap(va, 2 * g, 0, h, 0));
    say("map.same-range-again", cuMemMap(va, 2 * g, 0, h, 0));
    say("map.overlapping", cuMemMap(va + g, 2 * g, 0, h, 0));
    say("setAccess.past-mapping", cuMemSetAccess(va, 3 * g, &rw, 1));
    say("setAccess.unmapped-range", cuMemSetAccess(va + 2 * g, g, &rw, 1));
    say("setAccess.sub-range", cuMemSetAccess(va + g, g, &rw, 1));
    say("setAccess.ok", cuMemSetAccess(va, 2 * g, &rw, 1));
    CUmemGenericAllocationHandle kept = 0;
    say("retain.mapped", cuMemRetainAllocationHandle(&kept, (void *)va));
    printf("retain.same-handle\t%d\n", kept == h);
    say("retain.interior", cuMemRetainAllocationHandle(&bad, (void *)(va + g + 64)));
    say("retain.unmapped", cuMemRetainAllocationHandle(&bad, (void *)(va + 2 * g)));
    say("release.retained", cuMemRelease(kept));
    say("unmap.sub-range", cuMemUnmap(va, g));
    say("unmap.tail-sub-range", cuMemUnmap(va + g, g));
    say("addressFree.while-mapped", cuMemAddressFree(va, 4 * g));
    say("create.no-handle-types", cuMemCreate(&h2, g, &plain_prop, 0));
    int fd = -1;
    say("export.type-not-requested", cuMemExportToShareableHandle(&fd, h2, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    say("export.ok", cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    if (fd >= 0)
        close(fd);
    say("release.while-mapped", cuMemRelease(h));
    say("setAccess.after-release", cuMemSetAccess(va, 2 * g, &rw, 1));
    say("memsetD8.after-release", cuMemsetD8_v2(va, 1, 64));
    say("sync", cuCtxSynchronize());
    say("unmap.ok", cuMemUnmap(va, 2 * g));
    say("unmap.not-mapped", cuMemUnmap(va + 2 * g, g));
    say("unmap.again", cuMemUnmap(va, 2 * g));
    say("release.again", cuMemRelease(h));
    say("release.zero", cuMemRelease(0));
    say("addressFree.size-smaller", cuMemAddressFree(va, 2 * g));
    say("addressFree.interior", cuMemAddressFree(va + g, 3 * g));
    say("addressFree.ok", cuMemAddressFree(va, 4 * g));
    say("addressFree.again", cuMemAddressFree(va, 4 * g));
    say("release.no-handle-types", cuMemRelease(h2));
    /* A map that spans two adjacent reservations (R580 answered 0 to a map past a reservation's
     * end above: is the next reservation what it maps into?). */
    CUdeviceptr a = 0, b = 0;
    CUmemGenericAllocationHandle h3 = 0;
    say("create.two-granules", cuMemCreate(&h3, 2 * g, &fd_prop, 0));
    say("reserve.first", cuMemAddressReserve(&a, g, 0, 0, 0));
    say("reserve.next", cuMemAddressReserve(&b, g, 0, a + g, 0));
    printf("reserve.adjacent\t%d\n", b == a + g);
    say("map.across-reservations", cuMemMap(a, 2 * g, 0, h3, 0));
    say("unmap.across-reservations", cuMemUnmap(a, 2 * g));
    say("addressFree.first", cuMemAddressFree(a, g));
    say("addressFree.next", cuMemAddressFree(b, g));
    say("release.two-granules", cuMemRelease(h3));
    return 0;
}
