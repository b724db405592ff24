/* The steady state of the clean path: each case warms up (one call), then makes the same call
 * N times between two markers (cuDriverGetVersion, which the shim does not interpose), so that
 * the simulated driver's call log shows, between the markers, the program's N calls and every
 * call the shim made into the driver for them.
 *
 *   steady CASE N     CASE: can-access, copy-stream0, copy-own-stream, copy-sync, attach,
 *                     ipc-get, ipc-get-event, dtod, memset, alloc-free (a pair per step),
 *                     disable-enable (a pair per step: peer access stays enabled), endpoint-limits,
 *                     vmm-create-release, vmm-reserve-free, vmm-map-unmap, vmm-retain-release
 *                     (pairs), vmm-set-access, vmm-export, pool-alloc-free,
 *                     pool-alloc-default (pairs), pool-export-pointer
 * Prints MARKED <case> once the markers are written. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"

static void marker(void) {
    int version = 0;
    MUST(cuDriverGetVersion(&version));
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    const char *mode = argv[1];
    long n = atol(argv[2]);
    CUdevice d0, d1;
    CUcontext c0, c1;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&d0, 0));
    MUST(cuDeviceGet(&d1, 1));
    MUST(cuDevicePrimaryCtxRetain(&c0, d0));
    MUST(cuDevicePrimaryCtxRetain(&c1, d1));
    MUST(cuCtxSetCurrent(c1));
    CUdeviceptr b1;
    MUST(cuMemAlloc(&b1, 4096));
    MUST(cuCtxSetCurrent(c0));
    CUdeviceptr a0;
    MUST(cuMemAlloc(&a0, 4096));
    MUST(cuCtxEnablePeerAccess(c1, 0));
    CUstream own;
    MUST(cuStreamCreate(&own, CU_STREAM_NON_BLOCKING));
    CUdeviceptr managed;
    MUST(cuMemAllocManaged(&managed, 4096, CU_MEM_ATTACH_GLOBAL));
    CUipcMemHandle handle;
    CUevent ipc_event;
    MUST(cuEventCreate(&ipc_event, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
    CUipcEventHandle event_handle;
#if CUDA_VERSION >= 13030 /* the logical endpoints: the simulator only (R580 predates them) */
    CUlogicalEndpointProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_LOGICAL_ENDPOINT_TYPE_UNICAST;
    prop.unicast.device = 0;
    prop.size = 2 << 20;
    size_t align = 0, max = 0;
#endif
    /* VMM: one granule of device 0, reserved and mapped read-write (vmm-* cases). */
    CUmemAllocationProp vmm_prop;
    memset(&vmm_prop, 0, sizeof vmm_prop);
    vmm_prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    vmm_prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    vmm_prop.location.id = 0;
    vmm_prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t g = 0;
    MUST(cuMemGetAllocationGranularity(&g, &vmm_prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemAccessDesc rw;
    memset(&rw, 0, sizeof rw);
    rw.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    rw.location.id = 0;
    rw.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CUmemGenericAllocationHandle vh;
    CUdeviceptr va;
    MUST(cuMemCreate(&vh, g, &vmm_prop, 0));
    MUST(cuMemAddressReserve(&va, 2 * g, 0, 0, 0));
    MUST(cuMemMap(va, g, 0, vh, 0));
    MUST(cuMemSetAccess(va, g, &rw, 1));
    /* Pools: one created with POSIX fd handles and exported (its pointers export only then), a
     * megabyte of it for the pointer export. */
    CUmemPoolProps pool_props;
    memset(&pool_props, 0, sizeof pool_props);
    pool_props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pool_props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    pool_props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pool_props.location.id = 0;
    CUmemoryPool pool;
    MUST(cuMemPoolCreate(&pool, &pool_props));
    int pool_fd = -1;
    MUST(cuMemPoolExportToShareableHandle(&pool_fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    close(pool_fd);
    CUdeviceptr pooled;
    MUST(cuMemAllocFromPoolAsync(&pooled, 1 << 20, pool, own));
    MUST(cuStreamSynchronize(own));
    CUmemPoolPtrExportData pool_data;
    for (long i = 0; i <= n; i++) {
        if (i == 1) marker();
        int can = 0;
        if (!strcmp(mode, "can-access")) {
            MUST(cuDeviceCanAccessPeer(&can, d0, d1));
        } else if (!strcmp(mode, "copy-stream0")) {
            MUST(cuMemcpyPeerAsync(b1, c1, a0, c0, 4, 0));
        } else if (!strcmp(mode, "copy-own-stream")) {
            MUST(cuMemcpyPeerAsync(b1, c1, a0, c0, 4, own));
        } else if (!strcmp(mode, "copy-sync")) {
            MUST(cuMemcpyPeer(b1, c1, a0, c0, 4));
        } else if (!strcmp(mode, "attach")) {
            MUST(cuStreamAttachMemAsync(own, managed, 0, CU_MEM_ATTACH_SINGLE));
        } else if (!strcmp(mode, "ipc-get")) {
            MUST(cuIpcGetMemHandle(&handle, a0));
        } else if (!strcmp(mode, "ipc-get-event")) {
            MUST(cuIpcGetEventHandle(&event_handle, ipc_event));
        } else if (!strcmp(mode, "dtod")) {
            MUST(cuMemcpyDtoDAsync(b1, a0, 4, own));
        } else if (!strcmp(mode, "memset")) {
            MUST(cuMemsetD8Async(a0, 0, 4, own));
        } else if (!strcmp(mode, "alloc-free")) {
            CUdeviceptr p;
            MUST(cuMemAlloc(&p, 256));
            MUST(cuMemFree(p));
        } else if (!strcmp(mode, "vmm-create-release")) {
            CUmemGenericAllocationHandle h;
            MUST(cuMemCreate(&h, g, &vmm_prop, 0));
            MUST(cuMemRelease(h));
        } else if (!strcmp(mode, "vmm-reserve-free")) {
            CUdeviceptr r;
            MUST(cuMemAddressReserve(&r, g, 0, 0, 0));
            MUST(cuMemAddressFree(r, g));
        } else if (!strcmp(mode, "vmm-map-unmap")) {
            MUST(cuMemMap(va + g, g, 0, vh, 0));
            MUST(cuMemUnmap(va + g, g));
        } else if (!strcmp(mode, "vmm-retain-release")) {
            CUmemGenericAllocationHandle h;
            MUST(cuMemRetainAllocationHandle(&h, (void *)va));
            MUST(cuMemRelease(h));
        } else if (!strcmp(mode, "vmm-set-access")) {
            MUST(cuMemSetAccess(va, g, &rw, 1));
        } else if (!strcmp(mode, "vmm-export")) {
            int fd = -1;
            MUST(cuMemExportToShareableHandle(&fd, vh, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
            close(fd);
        } else if (!strcmp(mode, "pool-alloc-free")) {
            CUdeviceptr p;
            MUST(cuMemAllocFromPoolAsync(&p, 256, pool, own));
            MUST(cuMemFreeAsync(p, own));
        } else if (!strcmp(mode, "pool-alloc-default")) {
            CUdeviceptr p;
            MUST(cuMemAllocAsync(&p, 256, own));
            MUST(cuMemFreeAsync(p, own));
        } else if (!strcmp(mode, "pool-export-pointer")) {
            MUST(cuMemPoolExportPointer(&pool_data, pooled));
        } else if (!strcmp(mode, "disable-enable")) {
            MUST(cuCtxDisablePeerAccess(c1));
            MUST(cuCtxEnablePeerAccess(c1, 0));
#if CUDA_VERSION >= 13030
        } else if (!strcmp(mode, "endpoint-limits")) {
            MUST(cuLogicalEndpointGetLimits(&align, &max, &prop));
#endif
        } else {
            return 2;
        }
    }
    marker();
    MUST(cuStreamSynchronize(own));
    /* What the set-up made is given back: a process that leaves VMM memory hears of it at exit. */
    MUST(cuMemFreeAsync(pooled, own));
    MUST(cuStreamSynchronize(own));
    MUST(cuMemPoolDestroy(pool));
    MUST(cuMemUnmap(va, g));
    MUST(cuMemAddressFree(va, 2 * g));
    MUST(cuMemRelease(vh));
    printf("MARKED %s\n", mode);
    return 0;
}
