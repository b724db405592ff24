/* HIP stream-ordered pool scenarios for the rule tests: `pool_hip SCENARIO`.
 *   export-flags     hipMemPoolExportToShareableHandle with flags 1 (refused)
 *   import-flags     hipMemPoolImportFromShareableHandle with flags 1 (refused)
 *   export-not-ipc   the export of a pool created with hipMemHandleTypeNone (refused)
 *   alloc-imported   hipMallocFromPoolAsync from a pool imported from this process's own export
 *                    (the ROCm 6.2 runtime does not look, and allocates)
 *   correct          a shareable pool: allocated from, exported, imported back, its pointer
 *                    exported and imported, freed, both pools destroyed
 * Pools of device 0; allocations of 1 MiB on the null stream. */
#define __HIP_PLATFORM_AMD__
#include <hip/hip_runtime_api.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include "check.h"

static hipMemPool_t create(hipMemAllocationHandleType types) {
    hipMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = hipMemAllocationTypePinned;
    props.handleTypes = types;
    props.location.type = hipMemLocationTypeDevice;
    props.location.id = 0;
    hipMemPool_t pool = NULL;
    CALL("hipMemPoolCreate", hipMemPoolCreate(&pool, &props));
    return pool;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    const char *s = argv[1];
    MUST(hipSetDevice(0));
    const hipMemAllocationHandleType fd_type = hipMemHandleTypePosixFileDescriptor;
    int fd = -1;
    if (!strcmp(s, "export-not-ipc")) {
        hipMemPool_t plain = create(hipMemHandleTypeNone);
        CALL("hipMemPoolExportToShareableHandle",
             hipMemPoolExportToShareableHandle(&fd, plain, fd_type, 0));
        CALL("hipMemPoolDestroy", hipMemPoolDestroy(plain));
        return 0;
    }
    hipMemPool_t pool = create(fd_type);
    if (!strcmp(s, "export-flags")) {
        CALL("hipMemPoolExportToShareableHandle",
             hipMemPoolExportToShareableHandle(&fd, pool, fd_type, 1));
        CALL("hipMemPoolDestroy", hipMemPoolDestroy(pool));
        return 0;
    }
    CALL("hipMemPoolExportToShareableHandle",
         hipMemPoolExportToShareableHandle(&fd, pool, fd_type, 0));
    hipMemPool_t imported = NULL;
    if (!strcmp(s, "import-flags")) {
        CALL("hipMemPoolImportFromShareableHandle",
             hipMemPoolImportFromShareableHandle(&imported, (void *)(intptr_t)fd, fd_type, 1));
        close(fd);
        CALL("hipMemPoolDestroy", hipMemPoolDestroy(pool));
        return 0;
    }
    CALL("hipMemPoolImportFromShareableHandle",
         hipMemPoolImportFromShareableHandle(&imported, (void *)(intptr_t)fd, fd_type, 0));
    close(fd);
    void *p = NULL;
    if (!strcmp(s, "alloc-imported")) {
        CALL("hipMallocFromPoolAsync", hipMallocFromPoolAsync(&p, 1 << 20, imported, NULL));
        MUST(hipFree(p));
    } else if (!strcmp(s, "correct")) {
        CALL("hipMallocFromPoolAsync", hipMallocFromPoolAsync(&p, 1 << 20, pool, NULL));
        hipMemPoolPtrExportData data;
        CALL("hipMemPoolExportPointer", hipMemPoolExportPointer(&data, p));
        void *q = NULL;
        CALL("hipMemPoolImportPointer", hipMemPoolImportPointer(&q, imported, &data));
        MUST(hipFree(q));
        MUST(hipFree(p));
    } else {
        return 2;
    }
    CALL("hipMemPoolDestroy", hipMemPoolDestroy(imported));
    CALL("hipMemPoolDestroy", hipMemPoolDestroy(pool));
    return 0;
}
