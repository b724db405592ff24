/* HIP virtual memory management scenarios for the rule tests: `vmm_hip SCENARIO`.
 *   create-flags        hipMemCreate with flags 1 (refused)
 *   reserve-flags       hipMemAddressReserve with flags 1 (refused)
 *   export-flags        hipMemExportToShareableHandle with flags 1 (refused)
 *   map-flags           hipMemMap with flags 1 (refused)
 *   map-offset          hipMemMap at offset one granule (refused: HIP maps from offset 0)
 *   release-twice       hipMemRelease of a handle released already (the ROCm 6.2 runtime does not
 *                       look, and answers hipSuccess)
 *   address-free-twice  hipMemAddressFree of a reservation freed already
 *   correct             create (POSIX fd), reserve, map, access, export, import of its own fd,
 *                       unmap, releases, free: every call succeeds
 *   leak                create, reserve, map, access, then exit holding all of it (the at-exit
 *                       rules)
 * One allocation of two granules on device 0; a reservation of four. */
#define __HIP_PLATFORM_AMD__
#include <hip/hip_runtime_api.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include "check.h"

/* hipMemAllocationProp as ROCm 6 lays it out (CUDA's order): the simulated runtime is ROCm
 * 6.2's, while HIP 5.2's header, the one CI has, declares the older order (compressionType,
 * location, requestedHandleType, type, usage, win32HandleMetaData). Both are 32 bytes. */
typedef struct {
    hipMemAllocationType type;
    hipMemAllocationHandleType requestedHandleType;
    hipMemLocation location;
    void *win32HandleMetaData;
    unsigned char compressionType, gpuDirectRDMACapable;
    unsigned short usage;
} rocm6_prop;
_Static_assert(sizeof(rocm6_prop) == sizeof(hipMemAllocationProp), "32 bytes both");

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    const char *s = argv[1];
    MUST(hipSetDevice(0));
    rocm6_prop p6;
    memset(&p6, 0, sizeof p6);
    p6.type = hipMemAllocationTypePinned;
    p6.requestedHandleType = hipMemHandleTypePosixFileDescriptor;
    p6.location.type = hipMemLocationTypeDevice;
    p6.location.id = 0;
    hipMemAllocationProp prop;
    memcpy(&prop, &p6, sizeof prop);
    size_t g = 0;
    MUST(hipMemGetAllocationGranularity(&g, &prop, hipMemAllocationGranularityMinimum));
    hipMemGenericAllocationHandle_t h;
    void *va = NULL;
    if (!strcmp(s, "create-flags")) {
        CALL("hipMemCreate", hipMemCreate(&h, 2 * g, &prop, 1));
        return 0;
    }
    if (!strcmp(s, "reserve-flags")) {
        CALL("hipMemAddressReserve", hipMemAddressReserve(&va, 4 * g, 0, NULL, 1));
        return 0;
    }
    CALL("hipMemCreate", hipMemCreate(&h, 2 * g, &prop, 0));
    CALL("hipMemAddressReserve", hipMemAddressReserve(&va, 4 * g, 0, NULL, 0));
    if (!strcmp(s, "export-flags")) {
        int fd = -1;
        CALL("hipMemExportToShareableHandle",
             hipMemExportToShareableHandle(&fd, h, hipMemHandleTypePosixFileDescriptor, 1));
    } else if (!strcmp(s, "map-flags")) {
        CALL("hipMemMap", hipMemMap(va, g, 0, h, 1));
    } else if (!strcmp(s, "map-offset")) {
        CALL("hipMemMap", hipMemMap(va, g, g, h, 0));
    } else if (!strcmp(s, "release-twice")) {
        CALL("hipMemRelease", hipMemRelease(h));
        CALL("hipMemRelease", hipMemRelease(h));
        CALL("hipMemAddressFree", hipMemAddressFree(va, 4 * g));
        return 0;
    } else if (!strcmp(s, "address-free-twice")) {
        CALL("hipMemAddressFree", hipMemAddressFree(va, 4 * g));
        CALL("hipMemAddressFree", hipMemAddressFree(va, 4 * g));
        CALL("hipMemRelease", hipMemRelease(h));
        return 0;
    } else if (!strcmp(s, "leak")) {
        CALL("hipMemMap", hipMemMap(va, 2 * g, 0, h, 0));
        return 0;
    } else if (!strcmp(s, "correct")) {
        CALL("hipMemMap", hipMemMap(va, 2 * g, 0, h, 0));
        hipMemAccessDesc rw;
        memset(&rw, 0, sizeof rw);
        rw.location.type = hipMemLocationTypeDevice;
        rw.location.id = 0;
        rw.flags = hipMemAccessFlagsProtReadWrite;
        CALL("hipMemSetAccess", hipMemSetAccess(va, 2 * g, &rw, 1));
        int fd = -1;
        CALL("hipMemExportToShareableHandle",
             hipMemExportToShareableHandle(&fd, h, hipMemHandleTypePosixFileDescriptor, 0));
        hipMemGenericAllocationHandle_t again;
        CALL("hipMemImportFromShareableHandle",
             hipMemImportFromShareableHandle(&again, (void *)(intptr_t)fd,
                                             hipMemHandleTypePosixFileDescriptor));
        close(fd);
        CALL("hipMemRelease", hipMemRelease(again));
        CALL("hipMemUnmap", hipMemUnmap(va, 2 * g));
    } else {
        return 2;
    }
    CALL("hipMemRelease", hipMemRelease(h));
    CALL("hipMemAddressFree", hipMemAddressFree(va, 4 * g));
    return 0;
}
